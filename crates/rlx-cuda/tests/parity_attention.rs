//! GPU parity of the transformer group: the per-op cases of Attention (every mask kind,
//! GQA, decode on the split-over-keys path, keep-masks of several dtypes, softcap, score
//! scale, v_head_dim ≠ head_dim, all three layouts, odd lengths, the usual head dims), Rope
//! and FusedSwiGLU come from rlx-testutil's transformer case table; below them the test that
//! forces each tile variant of the attention lowering, and a decode loop over a long KV
//! cache replayed from one captured graph (the one-launch split attention's tickets and
//! the fused RopeCacheWrite, step after step).
mod common;
use common::*;
use rlx_cuda::CudaOptions;
use rlx_ir::{AttentionLayout as L, AttentionSpec, DType, Graph, HostTensor, MaskKind as M};
use rlx_ir::{RopeStyle, Shape};
use rlx_testutil::case::{draw_inputs, Check};
use rlx_testutil::cases::transformer::{attention_case, Attn, GPU_FLOATS, PLAIN};

rlx_testutil::case_tests!(transformer, cuda);

/// The lowering times its query-tile variants and keeps the fastest, so which one a shape
/// gets depends on the GPU: force each in turn (64/32/16 query rows for the SIMT kernel,
/// 4/2/1 warps for the tensor-core one; for f32 with head sizes 32/64/128 first the six
/// `attn_x3_*` instances, 4/2/1 warps × 64/32-key tiles, the four key-splitting
/// `attn_x3s_*` ones, then the SIMT ones) over head
/// sizes, masks, grouped KV heads, a KV cache and ragged tiles.
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
        Attn::new(L::Bshd, 1, 40, 96, 4, 2, 64)
            .mask(M::Causal)
            .cached(),
        Attn::new(L::Packed, 1, 50, 50, 6, 2, 64)
            .mask(M::Causal)
            .cap(20.0),
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
            // Past the last candidate a forced index takes the last one.
            let variants = if dt == DType::F32 { 13 } else { 3 };
            for variant in 0..variants {
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

/// SmolLM2's attention shapes (9 query / 3 KV heads of 64) over a 1024-row cache: the split
/// path's grid has 4 chunks of 256 keys a row and uses one per 256 valid keys at run time,
/// so the early steps write their rows from one block and the later ones merge 2–4
/// partials through the ticket. The optimised graph (k's Rope fused
/// into its cache write) replays one captured CUDA graph for every step, at positions from
/// an empty cache to a full one; each step matches the CPU running the unfused graph, and
/// the k cache is bit-equal to the CPU's after every step (Rope rounds like the CPU's).
#[test]
fn decode_steps_replay_fused_rope_cache_and_one_launch_attention() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("decode_steps_replay_fused_rope_cache_and_one_launch_attention");
    let (ctx, h, hkv, d) = (1024usize, 9usize, 3usize, 64usize);
    let (w, half) = (hkv * d, d / 2);
    for dt in GPU_FLOATS {
        let mut g = Graph::new("decode");
        let cache = |g: &mut Graph, n: &str| g.param(n, Shape::new(&[1, ctx, w], dt)).unwrap();
        let (kc, vc) = (cache(&mut g, "k_cache"), cache(&mut g, "v_cache"));
        let q = g.input("q", Shape::new(&[1, 1, h * d], dt)).unwrap();
        let k = g.input("k", Shape::new(&[1, 1, w], dt)).unwrap();
        let v = g.input("v", Shape::new(&[1, 1, w], dt)).unwrap();
        let pos = g.input("pos", Shape::new(&[1], DType::I64)).unwrap();
        let cos = g.input("cos", Shape::new(&[1, 1, half], dt)).unwrap();
        let sin = g.input("sin", Shape::new(&[1, 1, half], dt)).unwrap();
        let qr = g.rope(q, cos, sin, d, d, RopeStyle::Half).unwrap();
        let kr = g.rope(k, cos, sin, d, d, RopeStyle::Half).unwrap();
        let kw = g.cache_write(kc, kr, pos, 1).unwrap();
        let vw = g.cache_write(vc, v, pos, 1).unwrap();
        let spec = AttentionSpec::new(h, d).causal();
        let o = g.attention_cached(qr, kw, vw, pos, spec).unwrap();
        // The written cache is an output too, so every step checks its bits.
        g.set_outputs(vec![o, kw]);
        let fused = rlx_opt::optimize(&g).unwrap();
        let kinds = |k: OpKind| fused.nodes.iter().filter(|n| n.op.kind() == k).count();
        assert_eq!(kinds(OpKind::RopeCacheWrite), 1, "{dt}: k's Rope fused");

        let mut cpu = rlx_cpu::CpuExecutable::new(g.clone()).unwrap();
        let opts = CudaOptions {
            cuda_graph: true,
            ..CudaOptions::strict()
        };
        let mut gpu = compile_gpu(&fused, opts);
        let on_cpu: Vec<_> = (gpu.dispatch().into_iter())
            .filter(|(_, _, why)| why.is_some())
            .collect();
        assert!(on_cpu.is_empty(), "{dt}: CPU fallbacks {on_cpu:?}");
        let zeros = HostTensor::from_f64_as(&[1, ctx, w], &vec![0.0; ctx * w], dt);
        for name in ["k_cache", "v_cache"] {
            cpu.set_param(name, &zeros).unwrap();
            gpu.set_param(name, &zeros).unwrap();
        }
        let steps = (0..12).chain(500..506).chain(ctx - 6..ctx);
        for p in steps {
            let t = |n: &'static str, dims: &[usize], v: Vec<f64>| {
                (n, HostTensor::from_f64_as(dims, &v, dt))
            };
            let ins = [
                t("q", &[1, 1, h * d], rng.normals(h * d)),
                t("k", &[1, 1, w], rng.normals(w)),
                t("v", &[1, 1, w], rng.normals(w)),
                t("cos", &[1, 1, half], rng.uniforms(half, -1.0, 1.0)),
                t("sin", &[1, 1, half], rng.uniforms(half, -1.0, 1.0)),
                ("pos", HostTensor::from_i64(&[1], &[p as i64])),
            ];
            let want = cpu.run(&ins).unwrap();
            let got = gpu.run(&ins).unwrap();
            let tol = tol(dt, rlx_cuda::Precision::F32);
            compare(&format!("{dt} pos {p}"), &got[0], &want[0], tol);
            // Rope rounds each value once into dt, on either side, from the same f32 math.
            assert!(got[1].data == want[1].data, "{dt} pos {p}: k caches differ");
        }
    }
}

/// The same decode loop with only the attention as an output: the block fuses into one
/// `CachedAttention` (f32 tables, so the one-launch decode kernel serves every dtype) that
/// must match the unfused graph on the CPU at every step — each step reads the rows the
/// steps before it wrote into the param caches. Over a context long enough for several
/// chunks, with GQA, partial interleaved rotation and three query rows a step too. In f64
/// the node runs on the CPU fallback, which must write the device's caches back.
#[test]
fn decode_steps_replay_one_fused_cached_attention() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("decode_steps_replay_one_fused_cached_attention");
    // (ctx, heads, kv heads, head size, n_rot, style, query rows a step)
    let problems = [
        (
            1024usize,
            9usize,
            3usize,
            64usize,
            64usize,
            RopeStyle::Half,
            1usize,
        ),
        (300, 4, 1, 32, 16, RopeStyle::Interleaved, 3),
    ];
    for (ctx, h, hkv, d, n_rot, style, s) in problems {
        for dt in [DType::F32, DType::F16, DType::BF16, DType::F64] {
            let (w, half) = (hkv * d, n_rot / 2);
            let mut g = Graph::new("decode");
            let cache = |g: &mut Graph, n: &str| g.param(n, Shape::new(&[1, ctx, w], dt)).unwrap();
            let (kc, vc) = (cache(&mut g, "k_cache"), cache(&mut g, "v_cache"));
            let q = g.input("q", Shape::new(&[1, s, h * d], dt)).unwrap();
            let k = g.input("k", Shape::new(&[1, s, w], dt)).unwrap();
            let v = g.input("v", Shape::new(&[1, s, w], dt)).unwrap();
            let pos = g.input("pos", Shape::new(&[1], DType::I64)).unwrap();
            let f32s = Shape::new(&[s, 1, half], DType::F32);
            let cos = g.input("cos", f32s.clone()).unwrap();
            let sin = g.input("sin", f32s).unwrap();
            let qr = g.rope(q, cos, sin, d, n_rot, style).unwrap();
            let kr = g.rope(k, cos, sin, d, n_rot, style).unwrap();
            let kw = g.cache_write(kc, kr, pos, 1).unwrap();
            let vw = g.cache_write(vc, v, pos, 1).unwrap();
            let spec = AttentionSpec::new(h, d).causal();
            let o = g.attention_cached(qr, kw, vw, pos, spec).unwrap();
            g.set_outputs(vec![o]);
            let fused = rlx_opt::optimize(&g).unwrap();
            let n = |k: OpKind| fused.nodes.iter().filter(|n| n.op.kind() == k).count();
            let what = format!("{dt} ctx {ctx} {h}/{hkv}x{d} rot {n_rot} {style:?} rows {s}");
            assert_eq!(n(OpKind::CachedAttention), 1, "{what}: fused");
            assert_eq!(n(OpKind::CacheWrite) + n(OpKind::Attention), 0, "{what}");

            let mut cpu = rlx_cpu::CpuExecutable::new(g.clone()).unwrap();
            let opts = CudaOptions {
                cuda_graph: true,
                ..CudaOptions::strict()
            };
            let mut gpu = compile_gpu(&fused, opts);
            let on_cpu: Vec<_> = (gpu.dispatch().into_iter())
                .filter(|(_, _, why)| why.is_some())
                .map(|(_, k, _)| k)
                .collect();
            let want_cpu = if dt == DType::F64 {
                vec![OpKind::CachedAttention]
            } else {
                vec![]
            };
            assert_eq!(on_cpu, want_cpu, "{what}: CPU fallbacks");
            for name in ["k_cache", "v_cache"] {
                let init = HostTensor::from_f64_as(&[1, ctx, w], &rng.normals(ctx * w), dt);
                cpu.set_param(name, &init).unwrap();
                gpu.set_param(name, &init).unwrap();
            }
            let starts = (0..8).chain(250..256).chain(ctx - 4 * s..ctx - s + 1);
            for p in starts.step_by(s) {
                let t = |n: &'static str, dims: &[usize], v: Vec<f64>, dt| {
                    (n, HostTensor::from_f64_as(dims, &v, dt))
                };
                let ins = [
                    t("q", &[1, s, h * d], rng.normals(s * h * d), dt),
                    t("k", &[1, s, w], rng.normals(s * w), dt),
                    t("v", &[1, s, w], rng.normals(s * w), dt),
                    t(
                        "cos",
                        &[s, 1, half],
                        rng.uniforms(s * half, -1.0, 1.0),
                        DType::F32,
                    ),
                    t(
                        "sin",
                        &[s, 1, half],
                        rng.uniforms(s * half, -1.0, 1.0),
                        DType::F32,
                    ),
                    ("pos", HostTensor::from_i64(&[1], &[p as i64])),
                ];
                let want = cpu.run(&ins).unwrap();
                let got = gpu.run(&ins).unwrap();
                let tol = tol(dt, rlx_cuda::Precision::F32);
                compare(&format!("{what} pos {p}"), &got[0], &want[0], tol);
            }
        }
    }
}

/// A prompt's rows through a decoder layer's attention block as the LLM graphs build it: q,
/// k and v are last-axis narrows of one fused product, so the prefill reads them straight
/// from it (`qkv_rope_cache_*`, the narrows not run). Two prompts in a row at advancing
/// positions (the second attends over the caches the first wrote) must match the CPU; in f64
/// the attention falls back to the CPU, which then needs the narrows run after all.
#[test]
fn prefill_reads_q_k_v_out_of_the_fused_product() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("prefill_reads_q_k_v_out_of_the_fused_product");
    // (ctx, heads, kv heads, head size, n_rot, style, prompt rows)
    let problems = [
        (
            128usize,
            4usize,
            2usize,
            64usize,
            64usize,
            RopeStyle::Half,
            40usize,
        ),
        (96, 3, 1, 32, 16, RopeStyle::Interleaved, 24),
    ];
    for (ctx, h, hkv, d, n_rot, style, s) in problems {
        for dt in [DType::F32, DType::F16, DType::BF16, DType::F64] {
            let (w, half, wx) = (hkv * d, n_rot / 2, (h + 2 * hkv) * d + 8);
            let mut g = Graph::new("prefill");
            let cache = |g: &mut Graph, n: &str| g.param(n, Shape::new(&[1, ctx, w], dt)).unwrap();
            let (kc, vc) = (cache(&mut g, "k_cache"), cache(&mut g, "v_cache"));
            let x = g.input("x", Shape::new(&[1, s, wx], dt)).unwrap();
            let x2 = g.add(x, x).unwrap();
            let q = g.narrow(x2, -1, 0, h * d).unwrap();
            let k = g.narrow(x2, -1, h * d, w).unwrap();
            let v = g.narrow(x2, -1, h * d + w, w).unwrap();
            let pos = g.input("pos", Shape::new(&[1], DType::I64)).unwrap();
            let f32s = Shape::new(&[s, 1, half], DType::F32);
            let cos = g.input("cos", f32s.clone()).unwrap();
            let sin = g.input("sin", f32s).unwrap();
            let qr = g.rope(q, cos, sin, d, n_rot, style).unwrap();
            let kr = g.rope(k, cos, sin, d, n_rot, style).unwrap();
            let kw = g.cache_write(kc, kr, pos, 1).unwrap();
            let vw = g.cache_write(vc, v, pos, 1).unwrap();
            let spec = AttentionSpec::new(h, d).causal();
            let o = g.attention_cached(qr, kw, vw, pos, spec).unwrap();
            g.set_outputs(vec![o]);
            let fused = rlx_opt::optimize(&g).unwrap();
            let what = format!("{dt} ctx {ctx} {h}/{hkv}x{d} rot {n_rot} {style:?} rows {s}");
            let count = |k: OpKind| fused.nodes.iter().filter(|n| n.op.kind() == k).count();
            assert_eq!(count(OpKind::CachedAttention), 1, "{what}: fused");
            assert_eq!(count(OpKind::Narrow), 3, "{what}: the narrows");

            let mut cpu = rlx_cpu::CpuExecutable::new(g.clone()).unwrap();
            let mut gpu = compile_gpu(&fused, CudaOptions::strict());
            let ran: Vec<_> = gpu.dispatch().into_iter().map(|(_, k, _)| k).collect();
            let narrows = ran.iter().filter(|k| **k == OpKind::Narrow).count();
            // The narrows run only where the attention is on the CPU (f64).
            assert_eq!(
                narrows,
                if dt == DType::F64 { 3 } else { 0 },
                "{what}: {ran:?}"
            );
            for name in ["k_cache", "v_cache"] {
                let init = HostTensor::from_f64_as(&[1, ctx, w], &rng.normals(ctx * w), dt);
                cpu.set_param(name, &init).unwrap();
                gpu.set_param(name, &init).unwrap();
            }
            for p in [3, 3 + s] {
                let t = |n: &'static str, dims: &[usize], v: Vec<f64>, dt| {
                    (n, HostTensor::from_f64_as(dims, &v, dt))
                };
                let tab = |rng: &mut Rng| rng.uniforms(s * half, -1.0, 1.0);
                let ins = [
                    t("x", &[1, s, wx], rng.normals(s * wx), dt),
                    t("cos", &[s, 1, half], tab(&mut rng), DType::F32),
                    t("sin", &[s, 1, half], tab(&mut rng), DType::F32),
                    ("pos", HostTensor::from_i64(&[1], &[p as i64])),
                ];
                let want = cpu.run(&ins).unwrap();
                let got = gpu.run(&ins).unwrap();
                let tol = tol(dt, rlx_cuda::Precision::F32);
                compare(&format!("{what} pos {p}"), &got[0], &want[0], tol);
            }
        }
    }
}
