//! all-MiniLM-L6-v2 on CUDA against sentence-transformers' committed reference: cosine
//! ≥ 0.9999 per text in f32 and ≥ 0.999 in f16, batched (batch 8) and one by one alike.
//! Without a GPU it skips with a message (`RLX_REQUIRE_CUDA=1` fails instead); without the
//! model folder it skips.
use rlx_ir::DType;
use rlx_runtime::Device;
mod common;
use common::cuda;
mod embed_support;
use embed_support::{cases, check_embeddings, load, minilm};

#[test]
fn cuda_embeddings_match_sentence_transformers() {
    if !cuda() {
        return;
    }
    let Some(dir) = minilm() else { return };
    let reference = common::reference("st_ref_minilm.json");
    let cases = cases(&reference);
    for (dt, min_cos) in [(DType::F32, 0.9999), (DType::F16, 0.999)] {
        let emb = load(&dir, Device::Cuda(0), dt, 8);
        check_embeddings(&emb, &cases, min_cos, &format!("cuda {dt}"));
    }
}
