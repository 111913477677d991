//! Whole-graph plans on the GPU against the CPU: a transformer block through the full
//! optimisation pipeline, random graphs, a training step run for several steps with in-place
//! updates, CUDA graph on vs off, verify mode, and a plan with CPU-fallback segments.
mod common;
use common::*;
use rlx_autodiff::{train_step, Optimizer};
use rlx_cpu::CpuConstEvaluator;
use rlx_cuda::{CudaExecutable, CudaOptions};
use rlx_ir::*;
use rlx_opt::{ConstFold, Pipeline};

fn optimize(g: &Graph) -> Graph {
    Pipeline::full(Some(ConstFold::new(CpuConstEvaluator)))
        .run(g)
        .expect("pipeline")
        .0
}

fn block(dtype: DType, seq: usize, d: usize, heads: usize) -> Graph {
    let mut g = Graph::new("block");
    let x = g.input("x", Shape::new(&[2, seq, d], dtype)).unwrap();
    let p = |g: &mut Graph, n: &str, dims: &[usize]| g.param(n, Shape::new(dims, dtype)).unwrap();
    let linear = |g: &mut Graph, name: &str, x: NodeId, i: usize, o: usize| {
        let w = p(g, &format!("{name}.w"), &[i, o]);
        let b = p(g, &format!("{name}.b"), &[o]);
        let y = g.matmul(x, w).unwrap();
        g.add(y, b).unwrap()
    };
    let (g1, b1) = (p(&mut g, "ln1.g", &[d]), p(&mut g, "ln1.b", &[d]));
    let h = g.layer_norm(x, g1, b1, -1, 1e-5).unwrap();
    let q = linear(&mut g, "q", h, d, d);
    let k = linear(&mut g, "k", h, d, d);
    let v = linear(&mut g, "v", h, d, d);
    let a = g
        .attention(q, k, v, None, AttentionSpec::new(heads, d / heads).causal())
        .unwrap();
    let a = linear(&mut g, "o", a, d, d);
    let x2 = g.add(x, a).unwrap();
    let (g2, b2) = (p(&mut g, "ln2.g", &[d]), p(&mut g, "ln2.b", &[d]));
    let h2 = g.layer_norm(x2, g2, b2, -1, 1e-5).unwrap();
    let m = linear(&mut g, "fc1", h2, d, 4 * d);
    let m = g.activation(Activation::Gelu, m).unwrap();
    let m = linear(&mut g, "fc2", m, 4 * d, d);
    let y = g.add(x2, m).unwrap();
    g.set_outputs(vec![y]);
    g
}

fn block_feeds(rng: &mut Rng, seq: usize, d: usize) -> Vec<Feed> {
    let mut f = vec![normal(rng, "x", &[2, seq, d])];
    for n in ["ln1", "ln2"] {
        f.push(feed(&format!("{n}.g"), &[d], rng.uniforms(d, 0.5, 1.5)));
        f.push(normal(rng, &format!("{n}.b"), &[d]));
    }
    for (n, i, o) in [
        ("q", d, d),
        ("k", d, d),
        ("v", d, d),
        ("o", d, d),
        ("fc1", d, 4 * d),
        ("fc2", 4 * d, d),
    ] {
        let s = 1.0 / (i as f64).sqrt();
        f.push(feed(
            &format!("{n}.w"),
            &[i, o],
            rng.normals(i * o).iter().map(|v| v * s).collect(),
        ));
        f.push(normal(rng, &format!("{n}.b"), &[o]));
    }
    f
}

#[test]
fn transformer_block_matches_cpu() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("transformer_block_matches_cpu");
    let (seq, d, heads) = (37, 96, 4);
    let feeds = block_feeds(&mut rng, seq, d);
    for dt in FLOATS {
        parity_with(
            "transformer block (optimised)",
            &|dt| optimize(&block(dt, seq, d, heads)),
            &feeds,
            dt,
            CudaOptions::strict(),
            OpKindSet::empty(),
        );
    }
}

#[test]
fn cuda_graph_on_and_off_agree_exactly() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("cuda_graph_on_and_off_agree_exactly");
    let feeds = block_feeds(&mut rng, 29, 64);
    let g = optimize(&block(DType::F32, 29, 64, 4));
    let mut on = CudaOptions::strict();
    on.cuda_graph = true;
    let mut off = on.clone();
    off.cuda_graph = false;
    let a = run_gpu_exe(&mut compile_gpu(&g, on), &g, &feeds);
    let b = run_gpu_exe(&mut compile_gpu(&g, off), &g, &feeds);
    assert_eq!(
        a, b,
        "graph replay and plain launches must give identical bytes"
    );
}

#[test]
fn verify_mode_passes_on_a_correct_plan() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("verify_mode_passes_on_a_correct_plan");
    let feeds = block_feeds(&mut rng, 17, 64);
    let g = optimize(&block(DType::F32, 17, 64, 4));
    let mut o = CudaOptions::strict();
    o.verify = true;
    let mut exe = compile_gpu(&g, o);
    run_gpu_exe(&mut exe, &g, &feeds);
}

#[test]
fn cpu_fallback_segments_split_the_plan() {
    if !gpu() {
        return;
    }
    // f64 LayerNorm has no GPU kernel: it runs on the CPU between two GPU segments.
    let build = |dt: DType| {
        let mut g = Graph::new("fallback");
        let x = g.input("x", Shape::new(&[33, 65], dt)).unwrap();
        let w = g.param("w", Shape::new(&[65, 65], dt)).unwrap();
        let gamma = g.param("gamma", Shape::new(&[65], DType::F64)).unwrap();
        let h = g.matmul(x, w).unwrap();
        let h = g.cast(h, DType::F64).unwrap();
        let h = g.layer_norm(h, gamma, None, -1, 1e-5).unwrap();
        let h = g.cast(h, dt).unwrap();
        let y = g.activation(Activation::Tanh, h).unwrap();
        let y = g.matmul(y, w).unwrap();
        g.set_outputs(vec![y]);
        g
    };
    let mut rng = Rng::new("cpu_fallback_segments_split_the_plan");
    let feeds = vec![
        normal(&mut rng, "x", &[33, 65]),
        normal(&mut rng, "w", &[65, 65]),
        feed("gamma", &[65], rng.uniforms(65, 0.5, 1.5)),
    ];
    for graph_on in [true, false] {
        let mut o = CudaOptions::strict();
        o.cuda_graph = graph_on;
        let got = parity_with(
            "fallback plan",
            &build,
            &feeds,
            DType::F32,
            o,
            OpKindSet::of(&[OpKind::LayerNorm]),
        );
        assert_eq!(got.len(), 1);
    }
    let g = build(DType::F32);
    let mut exe = compile_gpu(&g, CudaOptions::strict());
    run_gpu_exe(&mut exe, &g, &feeds);
    let fallbacks: Vec<_> = exe
        .dispatch()
        .into_iter()
        .filter(|d| d.2.is_some())
        .collect();
    assert_eq!(
        fallbacks.len(),
        1,
        "only the f64 LayerNorm falls back: {fallbacks:?}"
    );
}

/// A random graph mixing elementwise, broadcast, matmul, norms, reshape/transpose, softmax
/// and reductions (the property generator's op mix).
fn random_graph(rng: &mut Rng, dt: DType) -> (Graph, Vec<Feed>) {
    let mut g = Graph::new("random");
    let (r, c) = (1 + rng.below(40), 1 + rng.below(70));
    let mut feeds = Vec::new();
    let x = g.input("x", Shape::new(&[r, c], dt)).unwrap();
    feeds.push(normal(rng, "x", &[r, c]));
    let mut vals = vec![(x, r, c)];
    for step in 0..6 + rng.below(6) {
        let (a, ar, ac) = vals[rng.below(vals.len())];
        let node = match rng.below(8) {
            0 => {
                let acts = [
                    Activation::Tanh,
                    Activation::Gelu,
                    Activation::Silu,
                    Activation::Relu,
                    Activation::Sigmoid,
                ];
                (
                    g.activation(acts[rng.below(acts.len())], a).unwrap(),
                    ar,
                    ac,
                )
            }
            1 => {
                let name = format!("b{step}");
                let b = g.param(name.clone(), Shape::new(&[ac], dt)).unwrap();
                feeds.push(normal(rng, &name, &[ac]));
                (g.add(a, b).unwrap(), ar, ac)
            }
            2 => {
                let n = 1 + rng.below(50);
                let name = format!("w{step}");
                let w = g.param(name.clone(), Shape::new(&[ac, n], dt)).unwrap();
                feeds.push(feed(
                    &name,
                    &[ac, n],
                    rng.normals(ac * n)
                        .iter()
                        .map(|v| v / (ac as f64).sqrt())
                        .collect(),
                ));
                (g.matmul(a, w).unwrap(), ar, n)
            }
            3 => {
                let name = format!("g{step}");
                let gm = g.param(name.clone(), Shape::new(&[ac], dt)).unwrap();
                feeds.push(feed(&name, &[ac], rng.uniforms(ac, 0.5, 1.5)));
                (g.layer_norm(a, gm, None, -1, 1e-5).unwrap(), ar, ac)
            }
            4 => (g.softmax(a, -1).unwrap(), ar, ac),
            5 => (g.transpose(a, &[1, 0]).unwrap(), ac, ar),
            6 => {
                let (b, br, bc) = vals[rng.below(vals.len())];
                if (br, bc) == (ar, ac) {
                    (g.mul(a, b).unwrap(), ar, ac)
                } else {
                    (g.activation(Activation::Neg, a).unwrap(), ar, ac)
                }
            }
            _ => {
                let s = g.reduce(a, ReduceOp::Sum, &[-1i64], true).unwrap();
                (g.sub(a, s).unwrap(), ar, ac)
            }
        };
        vals.push(node);
    }
    let out = vals.last().unwrap().0;
    g.set_outputs(vec![out]);
    (g, feeds)
}

#[test]
fn random_graphs_match_cpu() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("random_graphs_match_cpu");
    for i in 0..60 {
        let dt = FLOATS[i % 3];
        let (g, feeds) = random_graph(&mut rng, dt);
        let gopt = optimize(&g);
        let build = |d: DType| {
            if d == dt {
                gopt.clone()
            } else {
                optimize(&retype(&g, d))
            }
        };
        parity_with(
            &format!("random graph {i}"),
            &build,
            &feeds,
            dt,
            CudaOptions::strict(),
            OpKindSet::empty(),
        );
    }
}

/// The same graph with every float dtype replaced by `d` (for the f64 oracle run).
fn retype(g: &Graph, d: DType) -> Graph {
    let mut h = g.clone();
    for n in &mut h.nodes {
        if n.shape.dtype.is_float() {
            n.shape = n.shape.with_dtype(d);
        }
    }
    h
}

/// A small CNN + MLP trained for a few steps on GPU and CPU with in-place updates (Adam):
/// the losses and the final params agree.
#[test]
fn training_steps_match_cpu() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("training_steps_match_cpu");
    let (n, classes) = (16, 5);
    let mut g = Graph::new("cnn");
    let x = g.input("x", Shape::new(&[n, 1, 9, 9], DType::F32)).unwrap();
    let labels = g.input("y", Shape::new(&[n], DType::I64)).unwrap();
    let specs: Vec<(&str, Vec<usize>)> = vec![
        ("cw", vec![4, 1, 3, 3]),
        ("cb", vec![4]),
        ("fw", vec![4 * 4 * 4, classes]),
        ("fb", vec![classes]),
    ];
    let ps: Vec<NodeId> = specs
        .iter()
        .map(|(nm, d)| g.param(*nm, Shape::new(d, DType::F32)).unwrap())
        .collect();
    let h = g
        .add_node(
            Op::Conv(ConvSpec::new([3, 3]).padding([1, 1])),
            &[x, ps[0], ps[1]],
        )
        .unwrap();
    let h = g.activation(Activation::Relu, h).unwrap();
    let pool = PoolSpec {
        kind: PoolKind::Max,
        kernel_size: [2, 2],
        stride: [2, 2],
        padding: [0, 0],
    };
    let h = g.add_node(Op::Pool(pool), &[h]).unwrap();
    let h = g.reshape(h, &[n as i64, 64]).unwrap();
    let logits = g.matmul_bias_act(h, ps[2], ps[3], None).unwrap();
    let per = g
        .add_node(Op::SoftmaxCrossEntropyWithLogits, &[logits, labels])
        .unwrap();
    let loss = g
        .add_node(
            Op::Reduce {
                op: ReduceOp::Mean,
                axes: vec![],
                keep_dim: false,
            },
            &[per],
        )
        .unwrap();
    g.set_outputs(vec![loss]);
    let names: Vec<&str> = specs.iter().map(|(n, _)| *n).collect();
    let opt = Optimizer::adam(1e-2);
    let ts = train_step(&g, &names, &opt).unwrap();
    let step = optimize(&ts.graph);
    let mut gpu_exe = CudaExecutable::new(step.clone(), 0, CudaOptions::strict()).unwrap();
    let mut cpu_exe = rlx_cpu::CpuExecutable::new(step.clone()).unwrap();
    for (name, shape) in step.params() {
        let dims = shape.static_dims().unwrap();
        let k: usize = dims.iter().product();
        let v = if specs.iter().any(|(n, _)| n == &name) {
            rng.normals(k).iter().map(|v| v * 0.3).collect()
        } else {
            vec![0.0; k]
        };
        let t = HostTensor::from_f64_as(&dims, &v, shape.dtype);
        gpu_exe.set_param(name, &t).unwrap();
        cpu_exe.set_param(name, &t).unwrap();
    }
    let updates = ts.updates();
    let writes: Vec<(usize, &str)> = updates.iter().map(|(k, n)| (*k, n.as_str())).collect();
    for s in 0..4 {
        let mut inputs = vec![
            (
                "x",
                HostTensor::from_f64_as(&[n, 1, 9, 9], &rng.normals(n * 81), DType::F32),
            ),
            (
                "y",
                HostTensor::from_f64_as(
                    &[n],
                    &(0..n)
                        .map(|_| rng.below(classes) as f64)
                        .collect::<Vec<_>>(),
                    DType::I64,
                ),
            ),
        ];
        for (name, v) in opt.hyper_values() {
            inputs.push((name, HostTensor::from_f64_as(&[], &[v], DType::F32)));
        }
        let a = gpu_exe.run_writeback(&inputs, &writes, false).unwrap();
        let b = cpu_exe.run_writeback(&inputs, &writes, false).unwrap();
        let (la, lb) = (a[0].as_ref().unwrap().to_f64_vec()[0], b[0].to_f64_vec()[0]);
        assert!(
            (la - lb).abs() <= 1e-4 * lb.abs().max(1.0),
            "step {s}: loss {la} (GPU) vs {lb} (CPU)"
        );
    }
    for name in names {
        let (a, b) = (
            gpu_exe.param_value(name).unwrap(),
            cpu_exe.param_value(name).unwrap(),
        );
        compare(&format!("param {name} after 4 Adam steps"), &a, &b, 1e-4);
    }
}
