//! What the embedder tests share: the all-MiniLM-L6-v2 folder (absent → the test skips with
//! a message) and sentence-transformers' committed reference (`st_ref_minilm.json`: texts,
//! their ids after truncation at 256, the normalised embeddings), and the comparison.
#![allow(dead_code)]
use rlx_ir::DType;
use rlx_models::{EmbedOptions, Embedder};
use rlx_runtime::Device;
use serde_json::Value;
use std::path::PathBuf;

/// `$RLX_CACHE/hf/all-MiniLM-L6-v2`, or `None` (after saying so) when it is absent.
pub fn minilm() -> Option<PathBuf> {
    let dir = rlx_io::model_cache()?.join("hf").join("all-MiniLM-L6-v2");
    if dir.join("model.safetensors").exists() {
        Some(dir)
    } else {
        println!(
            "skipped: {} is absent (scripts/hf_ref_env.sh unpacks it)",
            dir.display()
        );
        None
    }
}

/// One reference case.
pub struct Case {
    pub text: String,
    pub ids: Vec<u32>,
    pub embedding: Vec<f64>,
}

pub fn cases(reference: &Value) -> Vec<Case> {
    let list = reference["cases"].as_array().expect("cases");
    list.iter()
        .map(|c| Case {
            text: c["text"].as_str().expect("text").to_string(),
            ids: (c["ids"].as_array().expect("ids").iter())
                .map(|x| x.as_u64().expect("id") as u32)
                .collect(),
            embedding: (c["embedding"].as_array().expect("embedding").iter())
                .map(|x| x.as_f64().expect("value"))
                .collect(),
        })
        .collect()
}

pub fn cosine(a: &[f32], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len(), "embedding widths differ");
    let (mut ab, mut aa, mut bb) = (0.0, 0.0, 0.0);
    for (&x, &y) in a.iter().zip(b) {
        let x = x as f64;
        ab += x * y;
        aa += x * x;
        bb += y * y;
    }
    let c = ab / (aa.sqrt() * bb.sqrt());
    assert!(c.is_finite(), "cosine is {c}");
    c
}

pub fn load(dir: &PathBuf, device: Device, precision: DType, batch: usize) -> Embedder {
    let opts = EmbedOptions {
        device,
        precision,
        batch,
    };
    Embedder::load(dir, &opts).unwrap_or_else(|e| panic!("loading {}: {e}", dir.display()))
}

/// Embed every case batched (`batch` 8) and one by one; the lowest cosine to the reference
/// of each, which must reach `min_cos`.
pub fn check_embeddings(emb: &Embedder, cases: &[Case], min_cos: f64, what: &str) -> (f64, f64) {
    let texts: Vec<&str> = cases.iter().map(|c| c.text.as_str()).collect();
    let batched = emb.embed(&texts).expect("embed batched");
    let mut worst = (f64::INFINITY, f64::INFINITY);
    for (i, (c, got)) in cases.iter().zip(&batched).enumerate() {
        assert_eq!(got.len(), emb.dim());
        let cos = cosine(got, &c.embedding);
        worst.0 = worst.0.min(cos);
        assert!(
            cos >= min_cos,
            "{what} batched: case {i} cosine {cos} < {min_cos}"
        );
        let single = emb.embed(&[c.text.as_str()]).expect("embed one");
        let cos = cosine(&single[0], &c.embedding);
        worst.1 = worst.1.min(cos);
        assert!(
            cos >= min_cos,
            "{what} one by one: case {i} cosine {cos} < {min_cos}"
        );
    }
    println!(
        "{what}: min cosine batched {:.8} (1 - cos {:.1e}), one by one {:.8} ({:.1e})",
        worst.0,
        1.0 - worst.0,
        worst.1,
        1.0 - worst.1
    );
    worst
}
