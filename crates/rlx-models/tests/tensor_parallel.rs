//! Tensor parallelism on random-weight GGUFs written here (seed printed, `RLX_SEED` replays):
//! llama (grouped-query), qwen2 (q/k/v biases), gemma3 (qk norms, post norms, a sliding
//! window, a logit cap, a tied head) and a Q8_0-packed llama, each over 2 and (where the
//! heads divide) 3 or 4 simulated CPU ranks. The reference is the unsharded graph on one
//! session, fed the same calls: a prefill of several tokens, then cached decode steps.
//!
//! Tolerance: f32 rel-L2 ≤ 1e-5 (DESIGN.md). Sharding only reorders sums — each row-parallel
//! product is R partial sums over K/R added in f64 by the all-reduce — so the difference is
//! f32 rounding, ~1e-7 per product, carried through the layers.
//!
//! Also: every rank ends with bit-identical logits (the all-reduce gives every rank the same
//! sum, and the rest is replicated); indivisible head counts and packed column splits that
//! cut blocks are typed errors; and `Llm` over `cpu,cpu` generates the 1-rank run's greedy
//! tokens.
#[path = "../../rlx-io/tests/gguf_writer/mod.rs"]
mod gguf_writer;
mod tp_support;

use rlx_io::gguf::Gguf;
use rlx_ir::{HostTensor, Op, QuantScheme};
use rlx_models::generate::{GenerateOptions, Llm, LoadOptions};
use rlx_models::generate_tp::ShardedDecoder;
use rlx_models::llm::{self, BuildOptions, LlmConfig, ShardedStore, TensorParallel, WeightFormat};
use rlx_models::ModelError;
use rlx_runtime::{CompiledGraph, Device, Mesh, Session};
use rlx_testutil::Rng;
use tp_support::{gguf_bytes, Quant, Spec};

const TOL: f64 = 1e-5;

fn rel_l2(a: &[f32], b: &[f32]) -> f64 {
    assert_eq!(a.len(), b.len());
    assert!(a.iter().all(|x| x.is_finite()), "NaN / inf in the result");
    let d: f64 = a.iter().zip(b).map(|(x, y)| ((x - y) as f64).powi(2)).sum();
    let r: f64 = b.iter().map(|y| (*y as f64).powi(2)).sum();
    (d / r).sqrt()
}

fn opts(ctx: usize) -> BuildOptions {
    BuildOptions {
        all_logits: true,
        cache: true,
        ctx,
        ..BuildOptions::default()
    }
}

fn all_reduces(exe: &CompiledGraph) -> usize {
    (exe.graph().nodes.iter())
        .filter(|n| matches!(n.op, Op::AllReduce { .. }))
        .count()
}

/// The inputs of one cached call: `tokens` at positions `start..`.
fn call(tokens: &[i64], start: usize) -> Vec<(&'static str, HostTensor)> {
    let n = tokens.len();
    let pos: Vec<i64> = (start as i64..(start + n) as i64).collect();
    vec![
        (llm::TOKENS, HostTensor::from_i64(&[1, n], tokens)),
        (llm::POSITIONS, HostTensor::from_i64(&[n], &pos)),
        (llm::POS, HostTensor::from_i64(&[1], &[start as i64])),
    ]
}

/// One rank graph per rank of a fresh `ranks`-rank CPU mesh, loaded with its slices.
fn rank_graphs(g: &Gguf, ranks: usize, bo: &BuildOptions) -> (Mesh, Vec<CompiledGraph>) {
    let cfg = LlmConfig::from_gguf(g).unwrap();
    let mesh = Mesh::cpu(ranks).unwrap();
    let exes = (0..ranks)
        .map(|r| {
            let tp = TensorParallel::new(r, ranks).unwrap();
            let bo = BuildOptions {
                tensor_parallel: tp,
                ..bo.clone()
            };
            let (graph, decls) = llm::build(&cfg, &bo).unwrap();
            let exe = mesh.session(r).compile(graph).unwrap();
            let store = ShardedStore::new(g, tp).unwrap();
            for (name, value) in llm::load(&store, &decls).unwrap() {
                exe.set_param_typed(&name, value).unwrap();
            }
            exe
        })
        .collect();
    (mesh, exes)
}

/// The sharded model over `ranks` ranks against the unsharded one, call by call: a prefill
/// of 6 tokens, then 3 decode steps. Returns the worst rel-L2.
fn compare(name: &str, spec: &Spec, ranks: &[usize]) -> f64 {
    let mut rng = Rng::new(name);
    let g = Gguf::from_bytes(&gguf_bytes(spec, rng.next_u64())).unwrap();
    let cfg = LlmConfig::from_gguf(&g).unwrap();
    let vocab = cfg.vocab as u64;
    let tokens: Vec<i64> = (0..9).map(|_| (rng.next_u64() % vocab) as i64).collect();
    let calls: Vec<(usize, &[i64])> = vec![
        (0, &tokens[..6]),
        (6, &tokens[6..7]),
        (7, &tokens[7..8]),
        (8, &tokens[8..9]),
    ];
    let bo = opts(16);
    let (graph, decls) = llm::build(&cfg, &bo).unwrap();
    let one = Session::new(Device::Cpu).compile(graph).unwrap();
    assert_eq!(all_reduces(&one), 0, "the 1-rank graph must be unchanged");
    for (n, v) in llm::load(&g, &decls).unwrap() {
        one.set_param_typed(&n, v).unwrap();
    }
    let want: Vec<Vec<f32>> = (calls.iter())
        .map(|(start, t)| one.run_typed(&call(t, *start)).unwrap()[0].to_f32_vec())
        .collect();
    let mut worst = 0f64;
    for &r in ranks {
        let (mesh, exes) = rank_graphs(&g, r, &bo);
        for exe in &exes {
            assert_eq!(all_reduces(exe), 2 * cfg.n_layer, "one per block");
        }
        for ((start, t), want) in calls.iter().zip(&want) {
            let inputs = call(t, *start);
            let outs = mesh
                .run(|rank, _| {
                    exes[rank]
                        .run_typed(&inputs)
                        .map(|o| o[0].to_f32_vec())
                        .map_err(ModelError::from)
                })
                .unwrap();
            for (rank, o) in outs.iter().enumerate() {
                assert_eq!(
                    o, &outs[0],
                    "{name}, {r} ranks: rank {rank}'s logits differ from rank 0's"
                );
            }
            let e = rel_l2(&outs[0], want);
            println!(
                "{name}: {r} ranks, {} tokens at {start}: rel-L2 {e:.2e}",
                t.len()
            );
            assert!(
                e <= TOL,
                "{name}, {r} ranks, {} tokens at {start}: rel-L2 {e:.2e} > {TOL:e}",
                t.len()
            );
            worst = worst.max(e);
        }
    }
    worst
}

#[test]
fn llama_shards_match_the_unsharded_model() {
    // 8 heads over 4 KV heads (grouped-query), n_ff 96: 2 and 4 ranks divide all three.
    compare("tp_llama", &Spec::new("llama"), &[2, 4]);
}

#[test]
fn qwen2_shards_with_qkv_biases_match() {
    let spec = Spec {
        embd: 48,
        heads: 6,
        kv: 6,
        ..Spec::new("qwen2")
    };
    compare("tp_qwen2", &spec, &[2, 3]);
}

#[test]
fn gemma3_shards_with_qk_and_post_norms_match() {
    let spec = Spec {
        embd: 48,
        heads: 4,
        kv: 2,
        head_dim: 16,
        ff: 64,
        tied: true,
        ..Spec::new("gemma3")
    };
    compare("tp_gemma3", &spec, &[2]);
}

#[test]
fn q8_0_shards_match() {
    // Row-parallel column slices of whole 32-value blocks: attn_output 64 → 32, ffn_down
    // 128 → 64; the packed table is replicated and serves as the tied head.
    let spec = Spec {
        heads: 4,
        kv: 2,
        head_dim: 16,
        ff: 128,
        tied: true,
        quant: Quant::Q8_0,
        ..Spec::new("llama")
    };
    compare("tp_q8_0", &spec, &[2]);
}

fn cfg_of(spec: &Spec) -> LlmConfig {
    LlmConfig::from_gguf(&Gguf::from_bytes(&gguf_bytes(spec, 7)).unwrap()).unwrap()
}

fn build_err(cfg: &LlmConfig, ranks: usize) -> ModelError {
    let bo = BuildOptions {
        tensor_parallel: TensorParallel::new(0, ranks).unwrap(),
        ..opts(16)
    };
    match llm::build(cfg, &bo) {
        Ok(_) => panic!("{ranks} ranks must not build"),
        Err(e) => e,
    }
}

#[test]
fn indivisible_sizes_are_typed_errors() {
    let cfg = cfg_of(&Spec::new("llama"));
    let e = build_err(&cfg, 3);
    println!("{e}");
    assert!(
        matches!(&e, ModelError::ShardIndivisible { what, n: 8, ranks: 3 } if what.contains("n_head")),
        "{e}"
    );
    let cfg = cfg_of(&Spec {
        kv: 2,
        ..Spec::new("llama")
    });
    let e = build_err(&cfg, 4);
    assert!(
        matches!(&e, ModelError::ShardIndivisible { what, n: 2, ranks: 4 } if what.contains("n_head_kv")),
        "{e}"
    );
    let cfg = cfg_of(&Spec {
        ff: 90,
        ..Spec::new("llama")
    });
    let e = build_err(&cfg, 4);
    assert!(
        matches!(&e, ModelError::ShardIndivisible { what, n: 90, .. } if what.contains("n_ff")),
        "{e}"
    );
    // Through a mesh: the error comes back, nothing waits at a collective.
    let g = Gguf::from_bytes(&gguf_bytes(&Spec::new("llama"), 7)).unwrap();
    let mesh = Mesh::cpu(3).unwrap();
    let r = ShardedDecoder::new(&cfg_of(&Spec::new("llama")), &g, &opts(16), mesh);
    assert!(matches!(r, Err(ModelError::ShardIndivisible { .. })));
}

#[test]
fn packed_column_splits_must_be_whole_blocks() {
    // Q8_0 ffn_down of 96 columns over 2 ranks: 48 per rank, not whole blocks of 32.
    let cfg = cfg_of(&Spec {
        heads: 4,
        kv: 2,
        head_dim: 16,
        quant: Quant::Q8_0,
        ..Spec::new("llama")
    });
    let e = build_err(&cfg, 2);
    println!("{e}");
    match &e {
        ModelError::ShardBlocks {
            name,
            scheme,
            block,
            cols,
            ..
        } => assert_eq!(
            (name.as_str(), scheme.as_str(), *block, *cols),
            ("blk.0.ffn_down.weight", "Q8_0", 32, 48)
        ),
        e => panic!("{e}"),
    }
    // Q4_K (blocks of 256) ffn_down of 1792 columns over 4 ranks: 448 a rank.
    let mut cfg = cfg_of(&Spec::new("llama"));
    cfg.n_ff = 1792;
    (cfg.tensors).insert(
        "blk.1.ffn_down.weight".into(),
        WeightFormat::Packed(QuantScheme::Q4_K),
    );
    let e = llm::shard_config(&cfg, TensorParallel::new(0, 4).unwrap()).unwrap_err();
    let msg = e.to_string();
    println!("{msg}");
    assert!(
        matches!(
            &e,
            ModelError::ShardBlocks {
                block: 256,
                cols: 448,
                ..
            }
        ),
        "{msg}"
    );
    assert!(
        msg.contains("blk.1.ffn_down.weight") && msg.contains("Q4_K") && msg.contains("448"),
        "{msg}"
    );
}

/// Greedy ids (and each step's top-2 logit gap) of `n` tokens after `prompt`.
fn greedy(llm: &mut Llm, prompt: &[u32], n: usize) -> (Vec<u32>, Vec<f32>, Vec<Vec<f32>>) {
    llm.reset();
    let d = llm.decoder();
    let mut logits = d.prefill(prompt).unwrap();
    let (mut ids, mut gaps, mut all) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..n {
        let mut order: Vec<usize> = (0..logits.len()).collect();
        order.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]).then(a.cmp(&b)));
        ids.push(order[0] as u32);
        gaps.push(logits[order[0]] - logits[order[1]]);
        all.push(logits.to_vec());
        logits = d.step(order[0] as u32).unwrap();
    }
    (ids, gaps, all)
}

#[test]
fn sharded_llm_generates_the_unsharded_greedy_tokens() {
    let mut rng = Rng::new("tp_generate");
    let spec = Spec {
        tokenizer: true,
        ..Spec::new("llama")
    };
    let dir = std::env::temp_dir().join(format!("rlx-tp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("tp.gguf");
    std::fs::write(&path, gguf_bytes(&spec, rng.next_u64())).unwrap();
    let load = |devices: Option<&str>| {
        let o = LoadOptions {
            ctx: Some(48),
            devices: devices.map(str::to_string),
            ..LoadOptions::default()
        };
        Llm::load(&path, &o).unwrap()
    };
    let mut one = load(None);
    let mut two = load(Some("cpu,cpu"));
    assert_eq!((one.decoder().ranks(), two.decoder().ranks()), (1, 2));
    let prompt = one.encode("hello world").unwrap();
    let n = 16;
    let (want, gaps, want_logits) = greedy(&mut one, &prompt, n);
    let (got, _, got_logits) = greedy(&mut two, &prompt, n);
    let worst = (want_logits.iter().zip(&got_logits))
        .map(|(a, b)| rel_l2(b, a))
        .fold(0f64, f64::max);
    let min_gap = gaps.iter().copied().fold(f32::INFINITY, f32::min);
    println!("greedy {want:?}; worst step rel-L2 {worst:.2e}; smallest top-2 gap {min_gap:.2e}");
    // Logits agree to ~1e-6 relative, so ids may differ only where the 1-rank run's top two
    // were tied within that; from such a step on the runs continue from different tokens.
    let tie = 1e-4 * want_logits[0].iter().fold(0f32, |m, x| m.max(x.abs()));
    let upto = match want.iter().zip(&got).position(|(a, b)| a != b) {
        None => n,
        Some(i) => {
            assert!(
                gaps[i] < tie,
                "step {i}: sharded picked {} where the 1-rank run picked {} (top-2 gap \
                 {:.2e})\n{want:?}\n{got:?}",
                got[i],
                want[i],
                gaps[i]
            );
            println!(
                "step {i}: a near-tie (gap {:.2e}) picked differently",
                gaps[i]
            );
            i
        }
    };
    assert!(worst <= TOL, "step logits rel-L2 {worst:.2e}");
    // The same through `Llm::generate` (greedy, stopping at EOS like the CLI).
    if upto > 0 {
        let go = GenerateOptions {
            max_tokens: upto.min(12),
            ..GenerateOptions::default()
        };
        one.reset();
        two.reset();
        let a = one.generate(&prompt, &go, |_| {}).unwrap();
        let b = two.generate(&prompt, &go, |_| {}).unwrap();
        assert_eq!(a.tokens, b.tokens, "Llm::generate over cpu,cpu");
        assert_eq!(a.tokens[..], want[..a.tokens.len()]);
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// Ranks held by different "processes" (a thread each with a mesh of its one rank, as
/// `Mesh::from_env` gives every process of a multi-process group): each builds its global
/// rank's shard, and both print the logits of the one-process two-rank decoder.
#[test]
fn ranks_in_separate_processes_decode_like_one_mesh() {
    let mut rng = Rng::new("ranks_in_separate_processes_decode_like_one_mesh");
    let spec = Spec::new("llama");
    let g = Gguf::from_bytes(&gguf_bytes(&spec, rng.next_u64())).unwrap();
    let cfg = LlmConfig::from_gguf(&g).unwrap();
    let tokens: Vec<i64> = (0..5)
        .map(|_| (rng.next_u64() % cfg.vocab as u64) as i64)
        .collect();
    let local = ShardedDecoder::new(&cfg, &g, &opts(16), Mesh::cpu(2).unwrap()).unwrap();
    let want = local.run_typed(&call(&tokens, 0)).unwrap()[0].to_f32_vec();
    let sessions = Mesh::cpu(2).unwrap().sessions().to_vec();
    let got: Vec<Vec<f32>> = std::thread::scope(|s| {
        let hs: Vec<_> = (sessions.into_iter())
            .map(|session| {
                let (g, cfg, tokens) = (&g, &cfg, &tokens);
                s.spawn(move || {
                    let mesh = Mesh::from_sessions(vec![session]).unwrap();
                    let d = ShardedDecoder::new(cfg, g, &opts(16), mesh).unwrap();
                    assert_eq!(d.ranks(), 2);
                    d.run_typed(&call(tokens, 0)).unwrap()[0].to_f32_vec()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for g in &got {
        assert_eq!(
            g, &want,
            "a process's logits differ from the one-process mesh's"
        );
    }
}
