//! The decoder builder on small GGUFs written here (no model file needed): the typed errors
//! of an unknown architecture, a missing tensor, a tensor of the wrong shape or of a type
//! rlx cannot run; and, on random weights (seed printed, `RLX_SEED` replays), that the
//! graph is causal (a prefix's logits are the full run's first rows), that the last-row
//! graph gives the full run's last row, and that Q8_0-packed weights give what their
//! dequantised f32 values give.
#[path = "../../rlx-io/tests/gguf_writer/mod.rs"]
mod gguf_writer;

use gguf_writer::Writer;
use half::f16;
use rlx_io::gguf::{Gguf, Value};
use rlx_ir::{DType, HostTensor};
use rlx_models::llm::{self, BuildOptions, LlmConfig};
use rlx_models::ModelError;
use rlx_runtime::{CompiledGraph, Device, Session};
use rlx_testutil::Rng;

const VOCAB: usize = 64;
const EMBD: usize = 32;
const HEADS: usize = 4;
const KV: usize = 2;
const HD: usize = EMBD / HEADS;
const FF: usize = 64;
const LAYERS: usize = 2;

/// ggml type ids.
const F32: u32 = 0;
const Q5_0: u32 = 6;
const Q8_0: u32 = 8;
const Q2_K: u32 = 10;

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// ggml's Q8_0 of one row (whole blocks of 32): f16 scale amax/127, then 32 rounded i8.
/// Also returns the values the blocks decode to.
fn q8_0(row: &[f32]) -> (Vec<u8>, Vec<f32>) {
    let (mut packed, mut back) = (Vec::new(), Vec::new());
    for b in row.chunks(32) {
        let amax = b.iter().fold(0f32, |m, x| m.max(x.abs()));
        let d = amax / 127.0;
        let id = if d == 0.0 { 0.0 } else { 1.0 / d };
        let dh = f16::from_f32(d);
        packed.extend(dh.to_bits().to_le_bytes());
        for &x in b {
            let q = (x * id).round() as i8;
            packed.push(q as u8);
            back.push(dh.to_f32() * q as f32);
        }
    }
    (packed, back)
}

/// A Q5_0 encoding of one row (whole blocks of 32): f16 scale amax/15, 5-bit quants
/// round(x/d) plus 16, clamped; fifth bits then nibbles as ggml lays them out. Also returns
/// the values the blocks decode to.
fn q5_0(row: &[f32]) -> (Vec<u8>, Vec<f32>) {
    let (mut packed, mut back) = (Vec::new(), Vec::new());
    for b in row.chunks(32) {
        let amax = b.iter().fold(0f32, |m, x| m.max(x.abs()));
        let dh = f16::from_f32(amax / 15.0);
        let d = dh.to_f32();
        let q: Vec<u32> = (b.iter())
            .map(|&x| {
                let v = if d == 0.0 { 0.0 } else { (x / d).round() };
                (v + 16.0).clamp(0.0, 31.0) as u32
            })
            .collect();
        packed.extend(dh.to_bits().to_le_bytes());
        let qh = (0..32).fold(0u32, |h, e| h | ((q[e] >> 4) & 1) << e);
        packed.extend(qh.to_le_bytes());
        packed.extend((0..16).map(|j| ((q[j] & 15) | (q[j + 16] & 15) << 4) as u8));
        back.extend(q.iter().map(|&v| d * (v as f32 - 16.0)));
    }
    (packed, back)
}

/// How the synthetic file stores its matrices.
#[derive(Clone, Copy, PartialEq)]
enum Store {
    F32,
    /// Q8_0 bytes; the f32 file of the same model holds the decoded values.
    Q8,
    /// Q8_0 values written as F32 (the reference for `Q8`).
    Q8AsF32,
    /// As `Q8`, but attn_q / attn_k in Q5_0: a layer whose q/k/v mix types, as llama.cpp's
    /// Q4_K_M writes 896-wide layers.
    Mixed,
    /// `Mixed`'s values written as F32 (its reference).
    MixedAsF32,
}

struct Synth {
    w: Writer,
    rng: Rng,
    store: Store,
}

impl Synth {
    fn new(arch: &str, rng: Rng, store: Store) -> Synth {
        let u = |n: usize| Value::U32(n as u32);
        let k = |s: &str| format!("{arch}.{s}");
        let w = Writer::new(3)
            .kv("general.architecture", Value::String(arch.into()))
            .kv(&k("block_count"), u(LAYERS))
            .kv(&k("embedding_length"), u(EMBD))
            .kv(&k("attention.head_count"), u(HEADS))
            .kv(&k("attention.head_count_kv"), u(KV))
            .kv(&k("feed_forward_length"), u(FF))
            .kv(&k("context_length"), u(64))
            .kv(&k("vocab_size"), u(VOCAB))
            .kv(&k("attention.layer_norm_rms_epsilon"), Value::F32(1e-5));
        Synth { w, rng, store }
    }

    fn vector(mut self, name: &str, n: usize) -> Synth {
        let v: Vec<f32> = (0..n)
            .map(|_| 1.0 + 0.1 * self.rng.normal() as f32)
            .collect();
        self.w = self.w.tensor(name, &[n as u64], F32, f32_bytes(&v));
        self
    }

    /// A `[rows, cols]` matrix (ggml dims `[cols, rows]`), std 1/√cols.
    fn matrix(mut self, name: &str, rows: usize, cols: usize) -> Synth {
        let s = 1.0 / (cols as f32).sqrt();
        let v: Vec<f32> = (0..rows * cols)
            .map(|_| s * self.rng.normal() as f32)
            .collect();
        let dims = [cols as u64, rows as u64];
        self.w = match self.store {
            Store::F32 => self.w.tensor(name, &dims, F32, f32_bytes(&v)),
            store => {
                let five = matches!(store, Store::Mixed | Store::MixedAsF32)
                    && (name.ends_with("attn_q.weight") || name.ends_with("attn_k.weight"));
                let (mut packed, mut back) = (Vec::new(), Vec::new());
                for r in v.chunks(cols) {
                    let (p, b) = if five { q5_0(r) } else { q8_0(r) };
                    packed.extend(p);
                    back.extend(b);
                }
                match store {
                    Store::Q8 | Store::Mixed => {
                        let ty = if five { Q5_0 } else { Q8_0 };
                        self.w.tensor(name, &dims, ty, packed)
                    }
                    _ => self.w.tensor(name, &dims, F32, f32_bytes(&back)),
                }
            }
        };
        self
    }

    /// Every llama tensor, `skip` left out (skip `output.weight` for a tied head).
    fn llama(mut self, skip: &str) -> Synth {
        let add = |s: Synth, name: String, shape: &[usize]| -> Synth {
            if name == skip {
                return s;
            }
            match shape {
                [n] => s.vector(&name, *n),
                [r, c] => s.matrix(&name, *r, *c),
                _ => unreachable!(),
            }
        };
        self = add(self, "token_embd.weight".into(), &[VOCAB, EMBD]);
        for l in 0..LAYERS {
            let p = |n: &str| format!("blk.{l}.{n}");
            for (n, shape) in [
                ("attn_norm.weight", vec![EMBD]),
                ("attn_q.weight", vec![HEADS * HD, EMBD]),
                ("attn_k.weight", vec![KV * HD, EMBD]),
                ("attn_v.weight", vec![KV * HD, EMBD]),
                ("attn_output.weight", vec![EMBD, HEADS * HD]),
                ("ffn_norm.weight", vec![EMBD]),
                ("ffn_gate.weight", vec![FF, EMBD]),
                ("ffn_up.weight", vec![FF, EMBD]),
                ("ffn_down.weight", vec![EMBD, FF]),
            ] {
                self = add(self, p(n), &shape);
            }
        }
        self = add(self, "output_norm.weight".into(), &[EMBD]);
        add(self, "output.weight".into(), &[VOCAB, EMBD])
    }

    fn gguf(&self) -> Gguf {
        Gguf::from_bytes(&self.w.bytes()).unwrap()
    }
}

fn err_of<T>(r: Result<T, ModelError>) -> ModelError {
    match r {
        Ok(_) => panic!("expected an error"),
        Err(e) => e,
    }
}

fn compile(gguf: &Gguf, opts: &BuildOptions) -> CompiledGraph {
    let cfg = LlmConfig::from_gguf(gguf).unwrap();
    let (graph, decls) = llm::build(&cfg, opts).unwrap();
    let exe = Session::new(Device::Cpu).compile(graph).unwrap();
    for (name, value) in llm::load(gguf, &decls).unwrap() {
        exe.set_param_typed(&name, value).unwrap();
    }
    exe
}

/// Build, compile and load; then the logits of `tokens` (all rows, or the last).
fn run(gguf: &Gguf, tokens: &[i64], all_logits: bool) -> Vec<f32> {
    let opts = BuildOptions {
        all_logits,
        ctx: 64,
        ..BuildOptions::default()
    };
    let exe = compile(gguf, &opts);
    let n = tokens.len();
    let pos: Vec<i64> = (0..n as i64).collect();
    let mut inputs = vec![
        (llm::TOKENS, HostTensor::from_i64(&[1, n], tokens)),
        (llm::POSITIONS, HostTensor::from_i64(&[n], &pos)),
    ];
    if !all_logits {
        inputs.push((llm::LAST, HostTensor::from_i64(&[1], &[n as i64 - 1])));
    }
    exe.run_typed(&inputs).unwrap()[0].to_f32_vec()
}

fn rel_l2(a: &[f32], b: &[f32]) -> f64 {
    let d: f64 = a.iter().zip(b).map(|(x, y)| ((x - y) as f64).powi(2)).sum();
    let r: f64 = b.iter().map(|y| (*y as f64).powi(2)).sum();
    (d / r).sqrt()
}

fn random_tokens(rng: &mut Rng, n: usize) -> Vec<i64> {
    (0..n)
        .map(|_| (rng.next_u64() % VOCAB as u64) as i64)
        .collect()
}

#[test]
fn unknown_arch_names_it_and_the_supported_ones() {
    let g = Synth::new("mamba", Rng::new("unknown_arch"), Store::F32).gguf();
    let e = err_of(LlmConfig::from_gguf(&g));
    assert!(matches!(&e, ModelError::UnsupportedArch { arch, .. } if arch == "mamba"));
    let msg = e.to_string();
    assert!(
        msg.contains("\"mamba\"") && msg.contains("llama, qwen2, gemma3"),
        "{msg}"
    );
}

#[test]
fn missing_tensor_names_it() {
    let g = Synth::new("llama", Rng::new("missing_tensor"), Store::F32)
        .llama("blk.1.ffn_up.weight")
        .gguf();
    let cfg = LlmConfig::from_gguf(&g).unwrap();
    let e = err_of(llm::build(&cfg, &BuildOptions::default()));
    assert!(
        matches!(&e, ModelError::MissingTensor { name, .. } if name == "blk.1.ffn_up.weight"),
        "{e}"
    );
    assert!(e.to_string().contains("blk.1.ffn_up.weight"));
}

#[test]
fn wrong_shape_names_the_tensor_and_both_shapes() {
    let s = Synth::new("llama", Rng::new("wrong_shape"), Store::F32).llama("blk.0.attn_k.weight");
    // K heads of the wrong width: [KV*HD + 8, EMBD].
    let g = s.matrix("blk.0.attn_k.weight", KV * HD + 8, EMBD).gguf();
    let cfg = LlmConfig::from_gguf(&g).unwrap();
    let (_, decls) = llm::build(&cfg, &BuildOptions::default()).unwrap();
    let e = err_of(llm::load(&g, &decls));
    match &e {
        ModelError::TensorShape {
            name,
            expected,
            got,
        } => {
            assert_eq!(name, "blk.0.attn_k.weight");
            assert_eq!(expected, &[KV * HD, EMBD]);
            assert_eq!(got, &[KV * HD + 8, EMBD]);
        }
        e => panic!("{e}"),
    }
}

#[test]
fn unsupported_tensor_type_names_the_tensor_and_type() {
    let mut s = Synth::new("llama", Rng::new("unsupported_type"), Store::F32)
        .llama("blk.0.ffn_gate.weight");
    // Q2_K: 84 bytes per 256 values.
    s.w = s.w.tensor(
        "blk.0.ffn_gate.weight",
        &[256, FF as u64],
        Q2_K,
        vec![0; 84 * FF],
    );
    let e = err_of(LlmConfig::from_gguf(&s.gguf()));
    assert!(
        matches!(&e, ModelError::UnsupportedTensorType { name, ty } if name == "blk.0.ffn_gate.weight" && ty == "Q2_K"),
        "{e}"
    );
}

#[test]
fn prefix_and_last_row_agree_with_the_full_run() {
    let s = Synth::new("llama", Rng::new("prefix_and_last_row"), Store::F32).llama("");
    let g = s.gguf();
    let mut rng = s.rng;
    let tokens = random_tokens(&mut rng, 12);
    let full = run(&g, &tokens, true);
    assert_eq!(full.len(), tokens.len() * VOCAB);
    let prefix = run(&g, &tokens[..5], true);
    let r = rel_l2(&prefix, &full[..5 * VOCAB]);
    assert!(
        r < 1e-5,
        "prefix rows differ from the full run's: rel-L2 {r:.2e}"
    );
    let last = run(&g, &tokens, false);
    let r = rel_l2(&last, &full[(tokens.len() - 1) * VOCAB..]);
    assert!(
        r < 1e-5,
        "the last-row graph differs from the full run: rel-L2 {r:.2e}"
    );
}

#[test]
fn q8_0_weights_give_their_dequantised_values() {
    // Both files draw the same numbers: same seed, same order. With the head tied the
    // packed embedding is gathered + dequantised and also serves as the DequantMatMul head.
    let seed = Rng::new("q8_0_weights").next_u64();
    for skip in ["", "output.weight"] {
        let file = |store| {
            Synth::new("llama", Rng::seeded(seed), store)
                .llama(skip)
                .gguf()
        };
        let tokens = random_tokens(&mut Rng::seeded(seed), 9);
        let a = run(&file(Store::Q8), &tokens, true);
        let b = run(&file(Store::Q8AsF32), &tokens, true);
        let r = rel_l2(&a, &b);
        println!(
            "Q8_0 packed vs dequantised f32 (tied head: {}): rel-L2 {r:.2e}",
            !skip.is_empty()
        );
        assert!(r < 1e-5, "rel-L2 {r:.2e}");
    }
}

/// q/k in Q5_0 beside v in Q8_0: the builder stores the three as one Q8_0 weight (the Q5_0
/// rows widened without changing a value), so each layer runs one q/k/v product, and the
/// logits are those of the decoded values.
#[test]
fn mixed_q5_0_and_q8_0_projections_run_as_one_product() {
    let seed = Rng::new("mixed_q5_0_and_q8_0").next_u64();
    let file = |store| {
        Synth::new("llama", Rng::seeded(seed), store)
            .llama("")
            .gguf()
    };
    let mixed = file(Store::Mixed);
    let cfg = LlmConfig::from_gguf(&mixed).unwrap();
    let (graph, _) = llm::build(&cfg, &BuildOptions::default()).unwrap();
    let products = |g: &rlx_ir::Graph, s: rlx_ir::QuantScheme| {
        (g.nodes.iter())
            .filter(|n| matches!(&n.op, rlx_ir::Op::DequantMatMul { scheme } if *scheme == s))
            .count()
    };
    // Per layer: q/k/v, o, gate/up, down, all Q8_0; the head too; no Q5_0 product left.
    assert_eq!(products(&graph, rlx_ir::QuantScheme::Q5_0), 0);
    assert_eq!(products(&graph, rlx_ir::QuantScheme::Q8_0), 4 * LAYERS + 1);
    let tokens = random_tokens(&mut Rng::seeded(seed), 9);
    let a = run(&mixed, &tokens, true);
    let b = run(&file(Store::MixedAsF32), &tokens, true);
    let r = rel_l2(&a, &b);
    println!("Q5_0 q/k + Q8_0 v as one Q8_0 product vs the decoded f32 values: rel-L2 {r:.2e}");
    assert!(r < 1e-5, "rel-L2 {r:.2e}");
}

/// The KV-cache graph, fed a prompt in one call and then a token a call, gives each
/// position the logits the full-sequence graph gives it; an f16 cache stays close.
#[test]
fn cached_steps_match_the_full_sequence() {
    let s = Synth::new("llama", Rng::new("cached_steps"), Store::F32).llama("");
    let g = s.gguf();
    let mut rng = s.rng;
    let tokens = random_tokens(&mut rng, 10);
    let full = run(&g, &tokens, true);
    let split = 1 + (rng.next_u64() % 6) as usize;
    for (dt, tol) in [(DType::F32, 1e-5), (DType::F16, 2e-3)] {
        let opts = BuildOptions {
            cache: true,
            ctx: 16,
            cache_dtype: dt,
            ..BuildOptions::default()
        };
        let exe = compile(&g, &opts);
        // The prompt in one call, then one token a call.
        let mut calls = vec![&tokens[..split]];
        calls.extend(tokens[split..].chunks(1));
        let mut start = 0;
        for chunk in calls {
            let n = chunk.len();
            let pos: Vec<i64> = (start as i64..(start + n) as i64).collect();
            let out = exe
                .run_typed(&[
                    (llm::TOKENS, HostTensor::from_i64(&[1, n], chunk)),
                    (llm::POSITIONS, HostTensor::from_i64(&[n], &pos)),
                    (llm::POS, HostTensor::from_i64(&[1], &[start as i64])),
                    (llm::LAST, HostTensor::from_i64(&[1], &[n as i64 - 1])),
                ])
                .unwrap()[0]
                .to_f32_vec();
            let at = start + n - 1;
            let r = rel_l2(&out, &full[at * VOCAB..(at + 1) * VOCAB]);
            assert!(
                r < tol,
                "{dt} cache, position {at} (prompt {split}): rel-L2 {r:.2e}"
            );
            start += n;
        }
        // A write past the cache's end is a typed error, not a wild write.
        let over = exe.run_typed(&[
            (llm::TOKENS, HostTensor::from_i64(&[1, 1], &[0])),
            (llm::POSITIONS, HostTensor::from_i64(&[1], &[16])),
            (llm::POS, HostTensor::from_i64(&[1], &[16])),
            (llm::LAST, HostTensor::from_i64(&[1], &[0])),
        ]);
        assert!(
            over.is_err(),
            "{dt} cache: a write at position 16 of 16 must fail"
        );
    }
}

/// `load_each_shared` hands packed tensors that need no rearranging over as the file's own
/// bytes; a CPU graph holding them (after the file value is dropped) gives the logits of one
/// loaded with copies, bit for bit, and each shared param holds the bytes `load` copies.
#[test]
fn shared_file_weights_match_copied_ones() {
    let s = Synth::new("llama", Rng::new("shared_file_weights"), Store::Mixed).llama("");
    let g = s.gguf();
    let mut rng = s.rng;
    let tokens = random_tokens(&mut rng, 7);
    let opts = BuildOptions {
        all_logits: true,
        ctx: 16,
        ..BuildOptions::default()
    };
    let copied = run(&g, &tokens, true);
    let cfg = LlmConfig::from_gguf(&g).unwrap();
    let (graph, decls) = llm::build(&cfg, &opts).unwrap();
    let exe = Session::new(Device::Cpu).compile(graph).unwrap();
    let owned: std::collections::HashMap<String, HostTensor> =
        llm::load(&g, &decls).unwrap().into_iter().collect();
    let mut shared = Vec::new();
    llm::load_each_shared(&g, &decls, |name, value| {
        match value {
            llm::ParamValue::Host(t) => exe.set_param_typed(name, t)?,
            llm::ParamValue::Shared { shape, bytes } => {
                assert_eq!(&*bytes, &owned[name].data[..], "{name}");
                assert_eq!(shape, owned[name].shape, "{name}");
                shared.push(name.to_string());
                exe.set_param_shared(name, &shape, bytes)?
            }
        }
        Ok(())
    })
    .unwrap();
    drop(g);
    println!("shared without a copy: {shared:?}");
    // The Q8_0 attn_output / ffn_down / head are packed and used as stored.
    assert!(
        shared.iter().any(|n| n.ends_with("attn_output.weight")),
        "{shared:?}"
    );
    assert!(shared.iter().any(|n| n == "output.weight"), "{shared:?}");
    let n = tokens.len();
    let pos: Vec<i64> = (0..n as i64).collect();
    let out = exe
        .run_typed(&[
            (llm::TOKENS, HostTensor::from_i64(&[1, n], &tokens)),
            (llm::POSITIONS, HostTensor::from_i64(&[n], &pos)),
        ])
        .unwrap()[0]
        .to_f32_vec();
    assert_eq!(out, copied);
}
