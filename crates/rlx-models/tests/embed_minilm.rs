//! all-MiniLM-L6-v2 on the CPU against sentence-transformers 3.0.1's committed reference:
//! token ids exactly (after its strip and truncation at 256), and every embedding with
//! cosine ≥ 0.9999 in f32 and ≥ 0.999 in f16 / bf16, batched (batch 8, sorted by length,
//! padded to a multiple of 8) and one by one alike. Skips when the folder is absent.
use rlx_ir::DType;
use rlx_runtime::Device;
mod common;
mod embed_support;
use embed_support::{cases, check_embeddings, load, minilm};

#[test]
fn token_ids_match_sentence_transformers() {
    let Some(dir) = minilm() else { return };
    let reference = common::reference("st_ref_minilm.json");
    let emb = load(&dir, Device::Cpu, DType::F32, 8);
    assert_eq!(emb.max_seq_length(), 256);
    let cases = cases(&reference);
    assert!(
        cases.iter().any(|c| c.ids.len() == 256),
        "no case reaches the truncation"
    );
    for (i, c) in cases.iter().enumerate() {
        assert_eq!(
            emb.tokenize(&c.text).unwrap(),
            c.ids,
            "case {i}: {:?}",
            c.text
        );
    }
}

#[test]
fn f32_embeddings_match_sentence_transformers() {
    let Some(dir) = minilm() else { return };
    let reference = common::reference("st_ref_minilm.json");
    let emb = load(&dir, Device::Cpu, DType::F32, 8);
    assert_eq!(emb.dim(), 384);
    check_embeddings(&emb, &cases(&reference), 0.9999, "cpu f32");
}

#[test]
fn half_embeddings_match_sentence_transformers() {
    let Some(dir) = minilm() else { return };
    let reference = common::reference("st_ref_minilm.json");
    let cases = cases(&reference);
    for dt in [DType::F16, DType::BF16] {
        let emb = load(&dir, Device::Cpu, dt, 8);
        check_embeddings(&emb, &cases, 0.999, &format!("cpu {dt}"));
    }
}

/// What a batch shape never seen costs (the CPU executor plans it on first use) against
/// the same shape run again; printed, and the plan must not cost more than the run.
#[test]
fn a_new_batch_shape_costs_little_more_than_a_known_one() {
    let Some(dir) = minilm() else { return };
    let emb = load(&dir, Device::Cpu, DType::F32, 8);
    let text = "a sentence of a dozen or so tokens to embed, give or take";
    for n in [3usize, 5, 8] {
        let texts = vec![text; n];
        let t = std::time::Instant::now();
        emb.embed(&texts).unwrap();
        let first = t.elapsed().as_secs_f64() * 1e3;
        let mut again = f64::INFINITY;
        for _ in 0..3 {
            let t = std::time::Instant::now();
            emb.embed(&texts).unwrap();
            again = again.min(t.elapsed().as_secs_f64() * 1e3);
        }
        println!("batch {n}: first run {first:.2} ms, again {again:.2} ms");
        assert!(
            first < 2.0 * again + 20.0,
            "batch {n}: first {first} ms, again {again} ms"
        );
    }
}
