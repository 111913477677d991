//! GPU parity of the transformer group: the per-op cases of Attention (every mask kind,
//! GQA, decode on the split-over-keys path, keep-masks of several dtypes, softcap, score
//! scale, v_head_dim ≠ head_dim, all three layouts, odd lengths, the usual head dims), Rope
//! and FusedSwiGLU come from rlx-testutil's transformer case table; below them the test that
//! forces each tile variant of the attention lowering.
mod common;
use common::*;
use rlx_cuda::CudaOptions;
use rlx_ir::{AttentionLayout as L, MaskKind as M};
use rlx_testutil::case::{draw_inputs, Check};
use rlx_testutil::cases::transformer::{attention_case, Attn, GPU_FLOATS, PLAIN};

rlx_testutil::case_tests!(transformer, cuda);

/// The lowering times its query-tile variants and keeps the fastest, so which one a shape
/// gets depends on the GPU: force each in turn (64/32/16 query rows for the SIMT kernel,
/// 4/2/1 warps for the tensor-core one) over head sizes, masks and ragged tiles.
#[test]
fn attention_every_tile_variant() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("attention_every_tile_variant");
    let problems = [
        Attn::new(L::Packed, 2, 45, 45, 3, 3, 32).mask(M::Causal),
        Attn::new(L::Bhsd, 1, 70, 83, 2, 2, 64).mask(M::Custom),
        Attn::new(L::Bshd, 2, 33, 33, 2, 2, 128).mask(M::SlidingWindow(9)),
        Attn::new(L::Packed, 1, 37, 37, 2, 2, 80),
        Attn::new(L::Bhsd, 2, 29, 29, 2, 2, 7),
    ];
    for a in problems {
        let case = attention_case(a, PLAIN);
        for dt in GPU_FLOATS {
            let raw = draw_inputs(&case, Check::Parity, &mut rng, dt);
            let feeds: Vec<Feed> = case
                .inputs
                .iter()
                .zip(raw)
                .map(|(i, v)| feed(i.name, &i.dims, v))
                .collect();
            for variant in 0..3 {
                let opts = CudaOptions {
                    force_variant: Some(variant),
                    ..CudaOptions::strict()
                };
                parity_with(
                    &format!("variant {variant} {}", case.name),
                    &|d| (case.build)(d),
                    &feeds,
                    dt,
                    opts,
                    OpKindSet::empty(),
                );
            }
        }
    }
}
