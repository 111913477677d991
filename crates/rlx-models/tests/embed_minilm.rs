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

/// Batch shapes come and go (the CPU executor plans each on first use and keeps a few): a
/// shape's first run, a run after other shapes and a run again give the same bits, and one
/// text's vector does not depend on the batch it rode in. (What a new shape costs in time is
/// measured by `rlx bench --suites embed`, not asserted here.)
#[test]
fn batch_shapes_that_come_and_go_give_the_same_vectors() {
    let Some(dir) = minilm() else { return };
    let emb = load(&dir, Device::Cpu, DType::F32, 8);
    let text = "a sentence of a dozen or so tokens to embed, give or take";
    let mut first = Vec::new();
    for n in [3usize, 5, 8] {
        let t = std::time::Instant::now();
        first.push(emb.embed(&vec![text; n]).unwrap());
        println!(
            "batch {n}: first run {:.2} ms",
            t.elapsed().as_secs_f64() * 1e3
        );
    }
    for (k, n) in [3usize, 5, 8].into_iter().enumerate().rev() {
        let again = emb.embed(&vec![text; n]).unwrap();
        assert_eq!(
            again, first[k],
            "batch {n}: a later run differs from the first"
        );
    }
    let one = &first[0][0];
    for (k, batch) in first.iter().enumerate() {
        for v in batch {
            let cos: f32 = v.iter().zip(one).map(|(a, b)| a * b).sum();
            assert!(
                cos >= 0.99999,
                "batch #{k}: cosine {cos} to the same text in batch 3"
            );
        }
    }
}

#[test]
fn pre_tokenized_ids_give_the_vectors_of_their_texts() {
    let Some(dir) = minilm() else { return };
    let reference = common::reference("st_ref_minilm.json");
    let emb = load(&dir, Device::Cpu, DType::F32, 8);
    let cases = cases(&reference);
    let texts: Vec<&str> = cases.iter().map(|c| c.text.as_str()).collect();
    let ids: Vec<Vec<u32>> = cases.iter().map(|c| c.ids.clone()).collect();
    // The committed ids are sentence-transformers' own: the same batches, the same bits.
    assert_eq!(emb.embed_ids(&ids).unwrap(), emb.embed(&texts).unwrap());
    let too_long = vec![vec![101u32; 257]];
    let err = emb.embed_ids(&too_long).unwrap_err().to_string();
    assert!(err.contains("text 0") && err.contains("257"), "{err}");
    let outside = vec![vec![101u32, 40_000, 102]];
    let err = emb.embed_ids(&outside).unwrap_err().to_string();
    assert!(err.contains("40000"), "{err}");
}
