//! Hugging Face decoder folders against transformers on the CPU (tests/data/hf_ref_tiny_*.json,
//! written by scripts/hf_ref.py from the folders scripts/gen_hf_tiny.py writes): token ids,
//! logits at several positions (rel-L2 ≤ 1e-4 in f32), greedy continuations token for token
//! through the KV-cache decoder, a sharded copy reading the same, the half-precision compute
//! path close to f32, and typed errors for a broken folder. The transformers comparisons run
//! on the CPU and on CUDA (one body; without a GPU the CUDA ones skip with a message unless
//! `RLX_REQUIRE_CUDA=1`).
use rlx_ir::{DType, HostTensor};
use rlx_models::generate::{GenerateOptions, Llm, LoadOptions};
use rlx_models::hf;
use rlx_models::llm::{self, BuildOptions};
use rlx_models::{ModelError, Tokenizer};
use rlx_runtime::{CompiledGraph, Device, Session};
mod common;
use common::cuda;
use common::{hf_model, reference};
use serde_json::Value;
use std::path::Path;

fn u32s(v: &Value) -> Vec<u32> {
    (v.as_array().expect("array").iter())
        .map(|x| x.as_u64().expect("id") as u32)
        .collect()
}

fn rel_l2(a: &[f32], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    let num: f64 = a.iter().zip(b).map(|(x, y)| (*x as f64 - y).powi(2)).sum();
    let den: f64 = b.iter().map(|y| y * y).sum();
    (num / den.max(1e-30)).sqrt()
}

/// The all-logits graph of a folder on the CPU, weights converted to `dtype`.
fn all_logits_model(dir: &Path, dtype: Option<DType>) -> (CompiledGraph, usize) {
    all_logits_on(dir, dtype, Device::Cpu)
}

fn all_logits_on(dir: &Path, dtype: Option<DType>, device: Device) -> (CompiledGraph, usize) {
    let (cfg, store) = hf::hf_decoder(dir, dtype).unwrap();
    let opts = BuildOptions {
        all_logits: true,
        ctx: 256,
        ..BuildOptions::default()
    };
    let (graph, decls) = llm::build(&cfg, &opts).unwrap();
    let exe = Session::new(device).compile(graph).unwrap();
    for (name, value) in llm::load(&store, &decls).unwrap() {
        exe.set_param_typed(&name, value).unwrap();
    }
    (exe, cfg.vocab)
}

fn logits(exe: &CompiledGraph, ids: &[u32]) -> Vec<f32> {
    let n = ids.len();
    let t: Vec<i64> = ids.iter().map(|&i| i as i64).collect();
    let p: Vec<i64> = (0..n as i64).collect();
    let out = exe
        .run_typed(&[
            (llm::TOKENS, HostTensor::from_i64(&[1, n], &t)),
            (llm::POSITIONS, HostTensor::from_i64(&[n], &p)),
        ])
        .unwrap();
    out[0].to_f32_vec()
}

/// Every case's ids, the logits at the recorded positions and the greedy continuation.
fn check_against_transformers(device: Device, folder: &str, refname: &str) {
    let Some(dir) = hf_model(folder) else { return };
    let r = reference(refname);
    let tok = Tokenizer::from_hf_dir(&dir).unwrap();
    let (exe, vocab) = all_logits_on(&dir, Some(DType::F32), device);
    assert_eq!(vocab as u64, r["vocab_size"].as_u64().unwrap());
    let mut llm = Llm::load(
        &dir,
        &LoadOptions {
            device,
            ctx: Some(256),
            dtype: Some(DType::F32),
            devices: None,
        },
    )
    .unwrap();
    let mut worst = 0f64;
    let mut positions = 0;
    for case in r["cases"].as_array().unwrap() {
        let text = case["text"].as_str().unwrap();
        let ids = u32s(&case["ids"]);
        assert_eq!(
            tok.encode(text, true, true).unwrap(),
            ids,
            "{folder}: ids of {text:?}"
        );
        let all = logits(&exe, &ids);
        for (pos, want) in case["logits"].as_object().unwrap() {
            let p: usize = pos.parse().unwrap();
            let want: Vec<f64> = (want.as_array().unwrap().iter())
                .map(|x| x.as_f64().unwrap())
                .collect();
            let e = rel_l2(&all[p * vocab..(p + 1) * vocab], &want);
            assert!(
                e <= 1e-4,
                "{device} {folder} {text:?} position {p}: rel-L2 {e:.2e}"
            );
            worst = worst.max(e);
            positions += 1;
        }
        llm.reset();
        let opts = GenerateOptions {
            max_tokens: r["max_new_tokens"].as_u64().unwrap() as usize,
            ..GenerateOptions::default()
        };
        let stats = llm.generate(&ids, &opts, |_| {}).unwrap();
        let want = u32s(&case["generated"]);
        assert_eq!(
            stats.tokens, want,
            "{device} {folder} {text:?}: greedy continuation"
        );
    }
    println!(
        "{device} {folder}: {positions} positions, worst logits rel-L2 {worst:.2e}; greedy exact"
    );
}

#[test]
fn tiny_llama_folder_matches_transformers() {
    check_against_transformers(Device::Cpu, "tiny-llama", "hf_ref_tiny_llama.json");
}

#[test]
fn tiny_qwen2_folder_matches_transformers() {
    check_against_transformers(Device::Cpu, "tiny-qwen2", "hf_ref_tiny_qwen2.json");
}

#[test]
fn tiny_hf_folders_match_transformers_on_cuda() {
    if !cuda() {
        return;
    }
    check_against_transformers(Device::Cuda(0), "tiny-llama", "hf_ref_tiny_llama.json");
    check_against_transformers(Device::Cuda(0), "tiny-qwen2", "hf_ref_tiny_qwen2.json");
}

#[test]
fn sharded_folder_reads_the_same_weights() {
    let (Some(one), Some(sharded)) = (hf_model("tiny-llama"), hf_model("tiny-llama-sharded"))
    else {
        return;
    };
    let ids = [72u32, 101, 108, 108, 111, 32, 119];
    let (a, _) = all_logits_model(&one, None);
    let (b, _) = all_logits_model(&sharded, None);
    assert_eq!(logits(&a, &ids), logits(&b, &ids));
}

#[test]
fn half_precision_compute_stays_close_to_f32() {
    let Some(dir) = hf_model("tiny-qwen2") else {
        return;
    };
    let r = reference("hf_ref_tiny_qwen2.json");
    let case = &r["cases"][2];
    let ids = u32s(&case["ids"]);
    let (f32m, vocab) = all_logits_model(&dir, Some(DType::F32));
    let want: Vec<f64> = logits(&f32m, &ids).iter().map(|&x| x as f64).collect();
    for dt in [DType::BF16, DType::F16] {
        let (m, _) = all_logits_model(&dir, Some(dt));
        let got = logits(&m, &ids);
        let e = rel_l2(&got, &want);
        println!(
            "tiny-qwen2 {dt} compute vs f32: rel-L2 {e:.2e} over {} logits",
            got.len()
        );
        assert!(e <= 2e-2, "{dt}: rel-L2 {e:.2e}");
        assert_eq!(got.len(), ids.len() * vocab);
    }
}

#[test]
fn broken_folders_are_typed_errors_naming_what_is_wrong() {
    let Some(dir) = hf_model("tiny-llama") else {
        return;
    };
    let tmp = std::env::temp_dir().join(format!("rlx-hf-broken-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    for f in [
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
    ] {
        std::fs::copy(dir.join(f), tmp.join(f)).unwrap();
    }
    let cfg: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).unwrap()).unwrap();
    let write = |c: &Value| std::fs::write(tmp.join("config.json"), c.to_string()).unwrap();
    let err = |dir: &Path| match hf::hf_decoder(dir, None) {
        Err(e) => e,
        Ok(_) => panic!("a broken folder loaded"),
    };

    let mut c = cfg.clone();
    c["architectures"] = serde_json::json!(["MistralForCausalLM"]);
    write(&c);
    assert!(matches!(err(&tmp), ModelError::UnsupportedArch { .. }));

    let mut c = cfg.clone();
    c["num_key_value_heads"] = serde_json::json!(3);
    write(&c);
    let e = err(&tmp).to_string();
    assert!(
        e.contains("num_key_value_heads") && e.contains("config.json"),
        "{e}"
    );

    // A config that promises a wider model than the tensors hold: the tensor is named.
    let mut c = cfg.clone();
    c["intermediate_size"] = serde_json::json!(cfg["intermediate_size"].as_u64().unwrap() + 8);
    write(&c);
    let (lc, store) = hf::hf_decoder(&tmp, None).unwrap();
    let (_, decls) = llm::build(&lc, &BuildOptions::default()).unwrap();
    match llm::load(&store, &decls) {
        Err(ModelError::TensorShape { name, .. }) => assert!(name.contains("ffn_"), "{name}"),
        Err(e) => panic!("wrong error {e}"),
        Ok(_) => panic!("mismatched shapes loaded"),
    }
    let _ = std::fs::remove_dir_all(&tmp);
}
