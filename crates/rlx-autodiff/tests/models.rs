//! Whole-model gradient checks: a small MLP classifier (fused matmul + tanh, matmul, bias
//! add, LayerNorm, integer-label cross-entropy, mean loss) through both `grad` and
//! `grad_with_loss`; a small CNN (conv-relu-maxpool ×2, linear, cross-entropy); one
//! pre-norm transformer block (RMSNorm, q/k/v projections, causal GQA attention with RoPE,
//! residuals, SwiGLU MLP).
mod common;
use common::*;
use rlx_autodiff::{grad_with_loss, D_OUTPUT};
use rlx_ir::{
    Activation, AttentionSpec, ConvSpec, DType, Graph, HostTensor, NodeId, Op, PoolKind, PoolSpec,
    ReduceOp, RopeStyle, Shape,
};

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
    // A gradient step lowers the loss (the gradients point the right way). The step is
    // sized to a first-order decrease of 0.1 % of the loss: a fixed rate can overshoot
    // where the draw is steep.
    let before = fwd[0].to_f64_vec()[0];
    let g2: f64 = with_loss[1..]
        .iter()
        .flat_map(|g| g.to_f64_vec())
        .map(|g| g * g)
        .sum();
    let lr = 1e-3 * before / g2;
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
    assert!(after < before, "loss {before} -> {after}");
}

fn mean_all(g: &mut Graph, x: NodeId) -> NodeId {
    g.add_node(
        Op::Reduce {
            op: ReduceOp::Mean,
            axes: vec![],
            keep_dim: false,
        },
        &[x],
    )
    .unwrap()
}

struct Model {
    g: Graph,
    feed: Vec<(&'static str, HostTensor)>,
    wrt: Vec<NodeId>,
}

#[test]
fn cnn_whole_model_gradcheck() {
    let mut rng = Rng::new("cnn_whole_model_gradcheck");
    let m = cnn(&mut rng);
    gradcheck("cnn", &m.g, &m.feed, &m.wrt, &mut rng);
}

fn cnn(rng: &mut Rng) -> Model {
    let (n, c) = (2, 3);
    let mut g = Graph::new("cnn");
    let x = f64_input(&mut g, "x", &[n, 1, 8, 8]);
    let labels = g.input("labels", Shape::new(&[n], DType::I64)).unwrap();
    let w1 = f64_input(&mut g, "w1", &[2, 1, 3, 3]);
    let b1 = f64_input(&mut g, "b1", &[2]);
    let w2 = f64_input(&mut g, "w2", &[3, 2, 3, 3]);
    let b2 = f64_input(&mut g, "b2", &[3]);
    let wl = f64_input(&mut g, "wl", &[12, c]);
    let bl = f64_input(&mut g, "bl", &[c]);
    let pool = PoolSpec {
        kind: PoolKind::Max,
        kernel_size: [2, 2],
        stride: [2, 2],
        padding: [0, 0],
    };
    let conv = ConvSpec::new([3, 3]).padding([1, 1]);
    let h = g.add_node(Op::Conv(conv), &[x, w1, b1]).unwrap();
    let h = g.activation(Activation::Relu, h).unwrap();
    let h = g.add_node(Op::Pool(pool), &[h]).unwrap(); // [n, 2, 4, 4]
    let h = g.add_node(Op::Conv(conv), &[h, w2, b2]).unwrap();
    // Tanh here so no random draw can kill every unit (a dead net has a zero gradient).
    let h = g.activation(Activation::Tanh, h).unwrap();
    let h = g.add_node(Op::Pool(pool), &[h]).unwrap(); // [n, 3, 2, 2]
    let h = g
        .add_node(
            Op::Reshape {
                shape: vec![n as i64, 12],
            },
            &[h],
        )
        .unwrap();
    let logits = g.matmul_bias_act(h, wl, bl, None).unwrap();
    let per = g
        .add_node(Op::SoftmaxCrossEntropyWithLogits, &[logits, labels])
        .unwrap();
    let loss = mean_all(&mut g, per);
    g.set_outputs(vec![loss]);
    let labels_v: Vec<f64> = (0..n).map(|_| rng.below(c) as f64).collect();
    // Spaced, shuffled pixels keep max-pool winners and ReLU signs stable under ±h.
    let npx = n * 64;
    let mut px: Vec<f64> = (0..npx).map(|i| i as f64 / npx as f64 - 0.3).collect();
    for i in (1..npx).rev() {
        px.swap(i, rng.below(i + 1));
    }
    Model {
        g,
        feed: vec![
            ("x", HostTensor::from_f64(&[n, 1, 8, 8], &px)),
            (
                "labels",
                HostTensor::from_f64_as(&[n], &labels_v, DType::I64),
            ),
            ("w1", rng.tensor(&[2, 1, 3, 3])),
            ("b1", HostTensor::from_f64(&[2], &rng.uniforms(2, 0.2, 0.6))),
            ("w2", scaled(rng, &[3, 2, 3, 3], 18f64.sqrt().recip())),
            ("b2", rng.tensor(&[3])),
            ("wl", scaled(rng, &[12, c], 12f64.sqrt().recip())),
            ("bl", rng.tensor(&[c])),
        ],
        wrt: vec![w1, b1, w2, b2, wl, bl, x],
    }
}

/// Normal draws times `f`: weights at the scale a real init gives (about 1/√fan-in), so
/// tanh, softmax and attention stay off saturation, where 1 − tanh², p − 1 and p(1 − p)
/// cancel and f32 keeps few correct digits of a near-zero gradient.
fn scaled(rng: &mut Rng, dims: &[usize], f: f64) -> HostTensor {
    let n = dims.iter().product();
    let v: Vec<f64> = rng.normals(n).iter().map(|x| x * f).collect();
    HostTensor::from_f64(dims, &v)
}

#[test]
fn transformer_block_gradcheck() {
    let mut rng = Rng::new("transformer_block_gradcheck");
    let m = block(&mut rng);
    gradcheck("transformer block", &m.g, &m.feed, &m.wrt, &mut rng);
}

fn block(rng: &mut Rng) -> Model {
    let (b, s, h, hkv, d) = (2, 3, 2, 1, 4);
    let e = h * d;
    let ff = 6;
    let mut g = Graph::new("block");
    let x = f64_input(&mut g, "x", &[b, s, e]);
    let cos = f64_input(&mut g, "cos", &[s, 1, d / 2]);
    let sin = f64_input(&mut g, "sin", &[s, 1, d / 2]);
    let g1 = f64_input(&mut g, "g1", &[e]);
    let wq = f64_input(&mut g, "wq", &[e, h * d]);
    let wk = f64_input(&mut g, "wk", &[e, hkv * d]);
    let wv = f64_input(&mut g, "wv", &[e, hkv * d]);
    let wo = f64_input(&mut g, "wo", &[h * d, e]);
    let g2 = f64_input(&mut g, "g2", &[e]);
    let w_up = f64_input(&mut g, "w_up", &[e, 2 * ff]);
    let w_down = f64_input(&mut g, "w_down", &[ff, e]);
    let xn = g.rms_norm(x, g1, None, -1, 1e-6).unwrap();
    let q = g.matmul(xn, wq).unwrap();
    let k = g.matmul(xn, wk).unwrap();
    let v = g.matmul(xn, wv).unwrap();
    let rope = Op::Rope {
        head_dim: d,
        n_rot: d,
        style: RopeStyle::Half,
    };
    let q = g.add_node(rope.clone(), &[q, cos, sin]).unwrap();
    let k = g.add_node(rope, &[k, cos, sin]).unwrap();
    let a = g
        .add_node(Op::Attention(AttentionSpec::new(h, d).causal()), &[q, k, v])
        .unwrap();
    let a = g.matmul(a, wo).unwrap();
    let x1 = g.add(x, a).unwrap();
    let x1n = g.rms_norm(x1, g2, None, -1, 1e-6).unwrap();
    let up = g.matmul(x1n, w_up).unwrap();
    let act = g
        .add_node(
            Op::FusedSwiGLU {
                cast_to: None,
                gate_first: false,
            },
            &[up],
        )
        .unwrap();
    let down = g.matmul(act, w_down).unwrap();
    let y = g.add(x1, down).unwrap();
    let sq = g.mul(y, y).unwrap();
    let loss = mean_all(&mut g, sq);
    g.set_outputs(vec![loss]);
    let th = rng.uniforms(s * d / 2, -2.0, 2.0);
    let cv: Vec<f64> = th.iter().map(|t| t.cos()).collect();
    let sv: Vec<f64> = th.iter().map(|t| t.sin()).collect();
    Model {
        g,
        feed: vec![
            ("x", rng.tensor(&[b, s, e])),
            ("cos", HostTensor::from_f64(&[s, 1, d / 2], &cv)),
            ("sin", HostTensor::from_f64(&[s, 1, d / 2], &sv)),
            ("g1", rng.tensor(&[e])),
            ("wq", scaled(rng, &[e, h * d], 0.3)),
            ("wk", scaled(rng, &[e, hkv * d], 0.3)),
            ("wv", scaled(rng, &[e, hkv * d], 0.5)),
            ("wo", scaled(rng, &[h * d, e], 0.5)),
            ("g2", rng.tensor(&[e])),
            ("w_up", scaled(rng, &[e, 2 * ff], 0.5)),
            ("w_down", scaled(rng, &[ff, e], 0.5)),
        ],
        wrt: vec![x, g1, wq, wk, wv, wo, g2, w_up, w_down],
    }
}

/// Change every f64 input of a graph to `dt` and rebuild the rest through the builders.
fn retype(g: &Graph, dt: DType) -> Graph {
    let mut out = Graph::new(g.name.clone());
    for n in &g.nodes {
        let id = match &n.op {
            Op::Input { name } => {
                let s = if n.shape.dtype == DType::F64 {
                    n.shape.with_dtype(dt)
                } else {
                    n.shape.clone()
                };
                out.input(name.clone(), s).unwrap()
            }
            op => {
                assert!(!op.is_leaf(), "models here have only inputs as leaves");
                out.add_node(op.clone(), &n.inputs).unwrap()
            }
        };
        assert_eq!(id, n.id);
    }
    out.set_outputs(g.outputs.clone());
    out
}

/// The same models built in f32: their gradient graphs (all the scalar constants the rules
/// create follow the graph's dtype) agree with the f64 gradients to f32 accuracy.
#[test]
fn f32_gradients_match_f64() {
    let mut rng = Rng::new("f32_gradients_match_f64");
    // A ReLU input or max-pool runner-up within f32's reach of the decision flips it in
    // one precision and not the other, and the gradients then legitimately part: draw a
    // CNN whose decisions have a margin.
    let cnn = (0..20)
        .map(|_| cnn(&mut rng))
        .find(|m| decision_margin(m) > 1e-5)
        .expect("a CNN draw with a decision margin");
    for (name, m) in [("cnn", cnn), ("block", block(&mut rng))] {
        let g32 = retype(&m.g, DType::F32);
        let gg64 = rlx_autodiff::grad(&m.g, &m.wrt).unwrap();
        let gg32 = rlx_autodiff::grad(&g32, &m.wrt).unwrap();
        let feed64: Vec<(String, HostTensor)> = m
            .feed
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .chain([(D_OUTPUT.to_string(), HostTensor::from_f64(&[], &[1.0]))])
            .collect();
        // Round inputs to f32 first so both graphs see the same values.
        let feed32: Vec<(String, HostTensor)> = feed64
            .iter()
            .map(|(k, v)| {
                let t = if v.dtype == DType::F64 {
                    HostTensor::from_f64_as(&v.shape, &v.to_f64_vec(), DType::F32)
                } else {
                    v.clone()
                };
                (k.clone(), t)
            })
            .collect();
        let feed64r: Vec<(String, HostTensor)> = feed32
            .iter()
            .map(|(k, v)| {
                let t = if v.dtype == DType::F32 {
                    HostTensor::from_f64(&v.shape, &v.to_f64_vec())
                } else {
                    v.clone()
                };
                (k.clone(), t)
            })
            .collect();
        let a = run(&gg32, &feed32);
        let b = run(&gg64, &feed64r);
        for (k, (x, y)) in a.iter().zip(&b).enumerate() {
            assert_eq!(x.dtype, DType::F32);
            let e = rel_l2(&x.to_f64_vec(), &y.to_f64_vec());
            assert!(e <= 1e-4, "{name} grad {k}: f32 vs f64 rel-L2 {e:.2e}");
        }
    }
}

/// The smallest nonzero distance, relative to its tensor's largest magnitude, between a
/// ReLU input and zero or between a max-pool window's winner and runner-up (f64 forward).
fn decision_margin(m: &Model) -> f64 {
    let mut g = m.g.clone();
    let mut probes = Vec::new();
    for n in &m.g.nodes {
        match &n.op {
            Op::Activation(Activation::Relu) => probes.push((n.inputs[0], None)),
            Op::Pool(p) if p.kind == PoolKind::Max => probes.push((n.inputs[0], Some(*p))),
            _ => {}
        }
    }
    g.set_outputs(probes.iter().map(|p| p.0).collect());
    let feed: Vec<(String, HostTensor)> = m
        .feed
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    let mut margin = f64::INFINITY;
    for (t, (_, pool)) in run(&g, &feed).iter().zip(&probes) {
        let v = t.to_f64_vec();
        let scale = v.iter().fold(0.0f64, |a, x| a.max(x.abs())).max(1e-300);
        let gaps: Vec<f64> = match pool {
            None => v.iter().map(|x| x.abs()).collect(),
            Some(p) => pool_gaps(&v, &t.shape, p),
        };
        // Exact ties (windows of ReLU zeros) are ties in both precisions alike.
        margin = gaps
            .iter()
            .filter(|&&x| x > 0.0)
            .fold(margin, |a, &x| a.min(x / scale));
    }
    margin
}

/// Winner minus runner-up of every window of an unpadded NCHW max pool.
fn pool_gaps(v: &[f64], dims: &[usize], p: &PoolSpec) -> Vec<f64> {
    let (planes, h, w) = (dims[0] * dims[1], dims[2], dims[3]);
    let [kh, kw] = p.kernel_size;
    let [sh, sw] = p.stride;
    let mut gaps = Vec::new();
    for pl in 0..planes {
        for oy in 0..(h - kh) / sh + 1 {
            for ox in 0..(w - kw) / sw + 1 {
                let mut win: Vec<f64> = (0..kh * kw)
                    .map(|i| v[pl * h * w + (oy * sh + i / kw) * w + ox * sw + i % kw])
                    .collect();
                win.sort_by(|a, b| b.total_cmp(a));
                gaps.push(win[0] - win[1]);
            }
        }
    }
    gaps
}
