//! wgpu parity of the transformer group (rlx-testutil's case tables: attention over every
//! mask kind, layout, GQA, head size, softcap and the KV-cache forms; Rope; CacheWrite,
//! RopeCacheWrite and CachedAttention; FusedSwiGLU) against the CPU reference and the f64
//! oracle.
mod common;
use common::*;

rlx_testutil::case_tests!(transformer, wgpu);
