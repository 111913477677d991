//! Data-parallel training on simulated CPU ranks: R ranks, each on its shard of a global
//! batch, with gradients all-reduced (Mean) in buckets, train like one rank on the whole
//! batch. Every rank's params and optimizer state stay bit-identical; they equal the 1-rank
//! trainer's within f32 rounding; the loss is the whole batch's.
//!
//! Nothing here can hang: a rank that fails aborts the group (`Mesh::run`), and every
//! collective waits at most the communicator's timeout.
use rlx_io::{Batch, Dataset};
use rlx_ir::{Activation, DType, Graph, HostTensor, Op, Shape};
use rlx_models::cnn::IMAGES;
use rlx_models::{
    CnnConfig, FitConfig, GraphBuilder, LrSchedule, ModelError, Optimizer, ParamSpec, Trainer,
};
use rlx_runtime::{Device, Mesh};

const SEED: u64 = 7;
const STEPS: usize = 4;

fn small() -> CnnConfig {
    CnnConfig {
        rows: 8,
        cols: 8,
        channels: [4, 6],
        classes: 10,
    }
}

/// A two-layer perceptron on the flattened 8×8 images.
#[derive(Clone, Copy)]
struct Mlp;

impl GraphBuilder for Mlp {
    fn params(&self) -> Vec<ParamSpec> {
        let p = |name: &str, dims: &[usize], fan_in| ParamSpec {
            name: name.into(),
            dims: dims.to_vec(),
            fan_in,
        };
        vec![
            p("l1.weight", &[64, 16], 64),
            p("l1.bias", &[16], 64),
            p("l2.weight", &[16, 10], 16),
            p("l2.bias", &[10], 16),
        ]
    }

    fn build(&self, batch: usize, with_loss: bool) -> Result<Graph, ModelError> {
        let mut g = Graph::new("mlp");
        let x = g.input(IMAGES, Shape::new(&[batch, 1, 8, 8], DType::F32))?;
        let mut ps = Vec::new();
        for s in self.params() {
            ps.push(g.param(s.name.as_str(), Shape::new(&s.dims, DType::F32))?);
        }
        let h = g.reshape(x, &[batch as i64, 64])?;
        let h = g.matmul_bias_act(h, ps[0], ps[1], Some(Activation::Relu))?;
        let logits = g.matmul_bias_act(h, ps[2], ps[3], None)?;
        if !with_loss {
            g.set_outputs(vec![logits]);
            return Ok(g);
        }
        let loss = rlx_models::cnn::mean_cross_entropy(&mut g, logits, batch)?;
        g.set_outputs(vec![loss, logits]);
        Ok(g)
    }
}

/// `STEPS` batches of `b` digits, the same for every trainer.
fn batches(b: usize) -> Vec<Batch> {
    let data = Dataset::digits().unwrap();
    data.batches(b, SEED).unwrap().take(STEPS).collect()
}

/// max |a − b| / max |b| over one tensor.
fn rel_err(a: &HostTensor, b: &HostTensor) -> f64 {
    let (a, b) = (a.to_f32_vec(), b.to_f32_vec());
    assert_eq!(a.len(), b.len());
    let scale = b
        .iter()
        .fold(0.0f64, |m, v| m.max(v.abs() as f64))
        .max(1e-12);
    let diff = a
        .iter()
        .zip(&b)
        .fold(0.0f64, |m, (x, y)| m.max((*x as f64 - *y as f64).abs()));
    diff / scale
}

/// Every param and optimizer-state name of a trainer's step graph.
fn state_names(t: &Trainer, opt: &Optimizer) -> Vec<String> {
    let params: Vec<String> = t.params().unwrap().into_iter().map(|p| p.0).collect();
    let mut names = params.clone();
    for p in &params {
        match opt {
            Optimizer::Sgd { .. } => names.push(format!("opt.momentum.{p}")),
            _ => {
                names.push(format!("opt.m.{p}"));
                names.push(format!("opt.v.{p}"));
            }
        }
    }
    if !matches!(opt, Optimizer::Sgd { .. }) {
        names.push("opt.step".into());
    }
    names
}

/// Train `STEPS` steps of a global batch `b` on one device and on `ranks` simulated
/// ranks (bucket cap `bucket`, if given); check ranks agree bit for bit and match the
/// 1-rank trainer; returns the max relative error and the bucket count.
fn compare(
    model: impl GraphBuilder + Clone + 'static,
    opt: Optimizer,
    ranks: usize,
    b: usize,
    bucket: Option<usize>,
) -> (f64, usize) {
    let mut one = Trainer::new(model.clone(), opt, Device::Cpu)
        .unwrap()
        .with_seed(SEED);
    let mut dp = Trainer::data_parallel(model, opt, Mesh::cpu(ranks).unwrap())
        .unwrap()
        .with_seed(SEED);
    if let Some(bytes) = bucket {
        dp = dp.with_bucket_bytes(bytes).unwrap();
    }
    assert_eq!(dp.ranks(), ranks);
    for (k, batch) in batches(b).iter().enumerate() {
        let l1 = one.step(batch).unwrap();
        let ld = dp.step(batch).unwrap();
        let e = ((l1 - ld) / l1).abs();
        assert!(
            e < 1e-5,
            "step {k}: loss {ld} on {ranks} ranks vs {l1} on one"
        );
    }
    let mut worst = 0.0f64;
    for name in state_names(&one, &opt) {
        let r0 = dp.rank_value(0, &name).unwrap();
        for r in 1..ranks {
            let v = dp.rank_value(r, &name).unwrap();
            assert_eq!(
                v.to_f32_vec(),
                r0.to_f32_vec(),
                "{name}: rank {r} differs from rank 0"
            );
        }
        let e = rel_err(&r0, &one.value(&name).unwrap());
        worst = worst.max(e);
    }
    let buckets = dp.grad_buckets(b).len();
    println!(
        "seed {SEED}, {} on {ranks} ranks, batch {b}, {STEPS} steps, {buckets} bucket(s): \
         max rel error vs 1 rank {worst:.3e}",
        opt.name()
    );
    (worst, buckets)
}

#[test]
fn cnn_on_2_3_and_4_ranks_matches_one_rank_with_sgd_and_adam() {
    for ranks in [2, 3, 4] {
        for opt in [Optimizer::sgd(0.05), Optimizer::adam(1e-2)] {
            let (err, buckets) = compare(small(), opt, ranks, 12, None);
            assert_eq!(buckets, 1, "the small CNN fits one 25 MiB bucket");
            assert!(err < 1e-4, "{} on {ranks} ranks: {err:e}", opt.name());
        }
    }
}

#[test]
fn mlp_with_adamw_matches_one_rank() {
    let (err, _) = compare(Mlp, Optimizer::adamw(1e-2), 2, 16, None);
    assert!(err < 1e-4, "{err:e}");
}

#[test]
fn small_buckets_split_and_still_match() {
    // The small CNN's gradients: fc 240 + 10, conv2 216 + 6, conv1 36 + 4 floats. With a
    // 512-byte cap: [fc.bias], [fc.weight] (960 B, alone), [conv2.bias], [conv2.weight]
    // (864 B), [conv1.bias, conv1.weight] (160 B) — in backward order.
    for opt in [Optimizer::sgd(0.05), Optimizer::adam(1e-2)] {
        let (err, buckets) = compare(small(), opt, 3, 12, Some(512));
        assert!(buckets >= 4, "{buckets} buckets");
        assert!(err < 1e-4, "{err:e}");
    }
    // A 0-byte cap: one all-reduce per gradient.
    let (err, buckets) = compare(small(), Optimizer::adam(1e-2), 2, 8, Some(0));
    assert_eq!(buckets, 6);
    assert!(err < 1e-4, "{err:e}");
}

#[test]
fn buckets_follow_the_backward_order() {
    let mut dp = Trainer::data_parallel(small(), Optimizer::sgd(0.05), Mesh::cpu(2).unwrap())
        .unwrap()
        .with_bucket_bytes(512)
        .unwrap();
    dp.step(&batches(4)[0]).unwrap();
    let b = dp.grad_buckets(4);
    // Gradient indices follow the params' order: conv1.weight 0 … fc.bias 5.
    let order: Vec<usize> = b.iter().flat_map(|b| b.grads.clone()).collect();
    assert_eq!(order.len(), 6);
    let first: Vec<usize> = order[..2].to_vec();
    assert!(
        first.contains(&4) && first.contains(&5),
        "the last layer's gradients come first: {order:?}"
    );
    assert!(order[4..].contains(&0) && order[4..].contains(&1));
    assert!(b[0].loss, "the loss rides in the first bucket");
    assert!(b.iter().all(|b| b.bytes <= 512 || b.grads.len() == 1));
}

/// Each bucket's all-reduce sits right after its last gradient, ahead of the rest of the
/// backward pass (what lets a GPU overlap it), and stays there through the compiler's
/// pipeline.
#[test]
fn all_reduces_interleave_with_the_backward_pass() {
    let fwd = small().build(4, true).unwrap();
    let names: Vec<String> = small().params().into_iter().map(|p| p.name).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut buckets = Vec::new();
    let ts = rlx_autodiff::train_step_with(&fwd, &names, &Optimizer::sgd(0.1), |g| {
        let (g, b) = rlx_autodiff::all_reduce_grads(&g, 512)?;
        buckets = b;
        Ok(g)
    })
    .unwrap();
    let mesh = Mesh::cpu(2).unwrap();
    let compiled = mesh.session(0).compile(ts.graph.clone()).unwrap();
    for g in [ts.graph, compiled.optimized_graph()] {
        let pos = |f: &dyn Fn(&Op) -> bool| -> Vec<usize> {
            (g.nodes.iter().filter(|n| f(&n.op)).map(|n| n.id.0)).collect()
        };
        let reduces = pos(&|op| matches!(op, Op::AllReduce { .. }));
        let conv_bwd = pos(&|op| matches!(op, Op::Conv2dBackwardWeight(_)));
        assert_eq!(reduces.len(), buckets.len(), "{}", g.name);
        // The fc bucket is reduced before conv2's and conv1's weight gradients exist.
        assert!(reduces[0] < conv_bwd[0], "{reduces:?} vs {conv_bwd:?}");
        assert!(reduces
            .windows(2)
            .any(|w| w[0] < conv_bwd[1] && conv_bwd[1] < w[1]));
    }
}

#[test]
fn a_one_rank_mesh_is_the_single_device_trainer() {
    let opt = Optimizer::adam(1e-2);
    let mut one = Trainer::new(small(), opt, Device::Cpu)
        .unwrap()
        .with_seed(SEED);
    let mut dp = Trainer::data_parallel(small(), opt, Mesh::cpu(1).unwrap())
        .unwrap()
        .with_seed(SEED);
    for batch in batches(8) {
        assert_eq!(one.step(&batch).unwrap(), dp.step(&batch).unwrap());
    }
    for (a, b) in one.params().unwrap().iter().zip(dp.params().unwrap()) {
        assert_eq!(a.1.to_f32_vec(), b.1.to_f32_vec(), "{}", a.0);
    }
}

#[test]
fn a_batch_that_does_not_divide_is_an_error() {
    let mut dp =
        Trainer::data_parallel(small(), Optimizer::sgd(0.05), Mesh::cpu(3).unwrap()).unwrap();
    let batch = &batches(8)[0];
    assert!(matches!(
        dp.step(batch),
        Err(ModelError::BatchNotDivisible { batch: 8, ranks: 3 })
    ));
    let data = Dataset::digits()
        .unwrap()
        .subset(&(0..30).collect::<Vec<_>>())
        .unwrap();
    let cfg = FitConfig {
        epochs: 1,
        batch_size: 8,
        seed: 0,
        schedule: LrSchedule::Constant,
        progress: false,
    };
    let r = dp.fit(&data, &data, &cfg, |_| {});
    assert!(
        matches!(r, Err(ModelError::BatchNotDivisible { batch: 8, ranks: 3 })),
        "{r:?}"
    );
    assert_eq!(dp.steps_done(), 0);
    // The trainer is still usable: nothing ran, so the group was never aborted.
    let batch = &batches(9)[0];
    assert!(dp.step(batch).unwrap().is_finite());
    assert!(dp.rank_value(3, "fc.weight").is_err());
}

#[test]
fn fit_over_ranks_matches_fit_on_one() {
    let data = Dataset::digits().unwrap();
    let (train, test) = data.split(0.2, 1).unwrap();
    // 1424 = 89·16 (even remainders would do too): both trainers see the same batches.
    let train = train.subset(&(0..1424).collect::<Vec<_>>()).unwrap();
    let cfg = FitConfig {
        epochs: 4,
        batch_size: 16,
        seed: 1,
        schedule: LrSchedule::Cosine,
        progress: false,
    };
    let opt = Optimizer::adam(1e-2);
    let mut one = Trainer::new(small(), opt, Device::Cpu)
        .unwrap()
        .with_seed(1);
    let r1 = one.fit(&train, &test, &cfg, |_| {}).unwrap();
    let mut dp = Trainer::data_parallel(small(), opt, Mesh::cpu(2).unwrap())
        .unwrap()
        .with_seed(1);
    let r2 = dp.fit(&train, &test, &cfg, |_| {}).unwrap();
    for (a, b) in r1.iter().zip(&r2) {
        println!(
            "epoch {}: loss {:.5} / {:.5}, accuracy {:.4} / {:.4} (1 rank / 2 ranks)",
            a.epoch, a.loss, b.loss, a.accuracy, b.accuracy
        );
        assert!((a.loss - b.loss).abs() < 1e-4 * a.loss.max(1.0));
        assert!((a.accuracy - b.accuracy).abs() <= 2.0 / test.n as f64);
    }
    assert_eq!(one.steps_done(), dp.steps_done());
    let last = r2.last().unwrap();
    assert!(last.accuracy > 0.85, "2-rank training learns: {last:?}");
}

/// `fit` over 3 ranks cuts each epoch's last batch to a multiple of 3, and skips it when
/// fewer samples than ranks remain.
#[test]
fn fit_trims_the_last_batch_to_the_ranks() {
    let data = Dataset::digits().unwrap();
    for (n, steps) in [(400, 34), (398, 33)] {
        // 400 = 33·12 + 4 (cut to 3); 398 = 33·12 + 2 (skipped).
        let train = data.subset(&(0..n).collect::<Vec<_>>()).unwrap();
        let mut dp = Trainer::data_parallel(small(), Optimizer::sgd(0.05), Mesh::cpu(3).unwrap())
            .unwrap()
            .with_seed(1);
        let cfg = FitConfig {
            epochs: 1,
            batch_size: 12,
            seed: 0,
            schedule: LrSchedule::Cosine,
            progress: false,
        };
        let r = dp.fit(&train, &train, &cfg, |_| {}).unwrap();
        assert!(r[0].loss.is_finite());
        assert_eq!(dp.steps_done(), steps, "{n} samples");
    }
}

/// Ranks held by different "processes" (a thread each, each with a mesh of its one rank,
/// as `Mesh::from_env` gives every process of a multi-process group): each takes its global
/// rank's shard, and they train exactly as one process holding both ranks.
#[test]
fn ranks_in_separate_processes_train_like_one_mesh() {
    let opt = Optimizer::adam(0.01);
    let ranks = 2;
    let mut local = Trainer::data_parallel(small(), opt, Mesh::cpu(ranks).unwrap())
        .unwrap()
        .with_seed(SEED);
    for batch in batches(12) {
        local.step(&batch).unwrap();
    }
    let sessions = Mesh::cpu(ranks).unwrap().sessions().to_vec();
    let names = state_names(&local, &opt);
    let apart: Vec<Vec<HostTensor>> = std::thread::scope(|s| {
        let hs: Vec<_> = (sessions.into_iter())
            .map(|session| {
                let names = &names;
                s.spawn(move || {
                    let mesh = Mesh::from_sessions(vec![session]).unwrap();
                    assert_eq!((mesh.ranks(), mesh.world()), (1, 2));
                    let mut t = Trainer::data_parallel(small(), opt, mesh)
                        .unwrap()
                        .with_seed(SEED);
                    assert_eq!(t.ranks(), 2);
                    for batch in batches(12) {
                        t.step(&batch).unwrap();
                    }
                    (names.iter())
                        .map(|n| t.rank_value(0, n).unwrap())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (k, name) in names.iter().enumerate() {
        let want = local.rank_value(0, name).unwrap();
        for got in &apart {
            assert_eq!(got[k].data, want.data, "{name}");
        }
    }
}
