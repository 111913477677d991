//! Small random-weight decoder GGUFs (llama, qwen2 with q/k/v biases, gemma3 with qk norms,
//! post norms, a sliding window and a logit cap) for the tensor-parallel tests, optionally
//! Q8_0-packed and with a SentencePiece vocabulary so `Llm` / `rlx generate` can load them.
//! Written through rlx-io's test GGUF writer (the including file declares `gguf_writer`);
//! shared with rlx-cli's tests through `#[path]`, so it needs nothing but rlx-io and half.
#![allow(dead_code)]
use crate::gguf_writer::Writer;
use half::f16;
use rlx_io::gguf::{Array, Strings, Value};

/// ggml type ids.
const F32: u32 = 0;
const Q8_0: u32 = 8;

/// How the matrices are stored.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Quant {
    F32,
    Q8_0,
}

/// One synthetic model.
#[derive(Clone, Debug)]
pub struct Spec {
    pub arch: &'static str,
    pub layers: usize,
    pub embd: usize,
    pub heads: usize,
    pub kv: usize,
    pub head_dim: usize,
    pub ff: usize,
    /// Vocabulary size when there is no tokenizer (with one, its token count).
    pub vocab: usize,
    pub ctx: usize,
    /// No `output.weight`: the head is the embedding table.
    pub tied: bool,
    pub quant: Quant,
    /// Write a SentencePiece vocabulary (`tokenizer.ggml.*`).
    pub tokenizer: bool,
}

impl Spec {
    pub fn new(arch: &'static str) -> Spec {
        Spec {
            arch,
            layers: 2,
            embd: 64,
            heads: 8,
            kv: 4,
            head_dim: 8,
            ff: 96,
            vocab: 80,
            ctx: 64,
            tied: false,
            quant: Quant::F32,
            tokenizer: false,
        }
    }
}

/// SplitMix64 with Box–Muller normals: the data only has to be random and replayable.
pub struct Rand(u64);

impl Rand {
    pub fn new(seed: u64) -> Rand {
        Rand(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn unit(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }
    pub fn normal(&mut self) -> f32 {
        let (u, v) = (self.unit(), self.unit());
        ((-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()) as f32
    }
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// ggml's Q8_0 of one row (whole blocks of 32): f16 scale amax/127, then 32 rounded i8.
fn q8_0(row: &[f32]) -> Vec<u8> {
    let mut packed = Vec::new();
    for b in row.chunks(32) {
        let amax = b.iter().fold(0f32, |m, x| m.max(x.abs()));
        let d = amax / 127.0;
        let id = if d == 0.0 { 0.0 } else { 1.0 / d };
        packed.extend(f16::from_f32(d).to_bits().to_le_bytes());
        packed.extend(b.iter().map(|&x| (x * id).round() as i8 as u8));
    }
    packed
}

/// Llama-2-style pieces: <unk> <s> </s>, 256 byte tokens, `▁` + letters.
fn vocabulary() -> (Vec<String>, Vec<f32>, Vec<i32>) {
    let mut tokens: Vec<String> = vec!["<unk>".into(), "<s>".into(), "</s>".into()];
    let mut types = vec![2, 3, 3];
    tokens.extend((0..=255u8).map(|b| format!("<0x{b:02X}>")));
    types.extend([6; 256]);
    let mut scores = vec![0.0f32; tokens.len()];
    for (i, c) in ('a'..='z').enumerate() {
        for p in [format!("▁{c}"), c.to_string()] {
            tokens.push(p);
            scores.push(-(i as f32) - 1.0);
            types.push(1);
        }
    }
    tokens.push("▁".into());
    scores.push(-0.5);
    types.push(1);
    (tokens, scores, types)
}

/// The GGUF bytes of `spec` with weights drawn from `seed`.
pub fn gguf_bytes(spec: &Spec, seed: u64) -> Vec<u8> {
    let mut rng = Rand::new(seed);
    let a = spec.arch;
    let u = |n: usize| Value::U32(n as u32);
    let k = |s: &str| format!("{a}.{s}");
    let mut vocab = spec.vocab;
    let mut w = Writer::new(3)
        .kv("general.architecture", Value::String(a.into()))
        .kv(&k("block_count"), u(spec.layers))
        .kv(&k("embedding_length"), u(spec.embd))
        .kv(&k("attention.head_count"), u(spec.heads))
        .kv(&k("attention.head_count_kv"), u(spec.kv))
        .kv(&k("attention.key_length"), u(spec.head_dim))
        .kv(&k("attention.value_length"), u(spec.head_dim))
        .kv(&k("feed_forward_length"), u(spec.ff))
        .kv(&k("context_length"), u(spec.ctx))
        .kv(&k("attention.layer_norm_rms_epsilon"), Value::F32(1e-5));
    if spec.tokenizer {
        let (tokens, scores, types) = vocabulary();
        vocab = tokens.len();
        w = w
            .kv("tokenizer.ggml.model", Value::String(b"llama".to_vec()))
            .kv(
                "tokenizer.ggml.tokens",
                Value::Array(Array::String(tokens.iter().collect::<Strings>())),
            )
            .kv("tokenizer.ggml.scores", Value::Array(Array::F32(scores)))
            .kv("tokenizer.ggml.token_type", Value::Array(Array::I32(types)));
    }
    w = w.kv(&k("vocab_size"), u(vocab));
    if a == "gemma3" {
        // Layer 0 slides over a window of 4 positions, layer 1 is dense.
        w = w
            .kv(&k("attention.sliding_window"), u(4))
            .kv(&k("attention.sliding_window_pattern"), u(2))
            .kv(&k("final_logit_softcapping"), Value::F32(30.0));
    }
    let vector = |w: Writer, rng: &mut Rand, name: &str, n: usize, around: f32| {
        let v: Vec<f32> = (0..n).map(|_| around + 0.1 * rng.normal()).collect();
        w.tensor(name, &[n as u64], F32, f32_bytes(&v))
    };
    let matrix = |w: Writer, rng: &mut Rand, name: &str, rows: usize, cols: usize| {
        let s = 1.0 / (cols as f32).sqrt();
        let v: Vec<f32> = (0..rows * cols).map(|_| s * rng.normal()).collect();
        let dims = [cols as u64, rows as u64];
        match spec.quant {
            Quant::F32 => w.tensor(name, &dims, F32, f32_bytes(&v)),
            Quant::Q8_0 => {
                let packed = v.chunks(cols).flat_map(q8_0).collect();
                w.tensor(name, &dims, Q8_0, packed)
            }
        }
    };
    let (e, hd) = (spec.embd, spec.head_dim);
    let (q, kv) = (spec.heads * hd, spec.kv * hd);
    w = matrix(w, &mut rng, "token_embd.weight", vocab, e);
    for l in 0..spec.layers {
        let p = |n: &str| format!("blk.{l}.{n}");
        w = vector(w, &mut rng, &p("attn_norm.weight"), e, 1.0);
        w = matrix(w, &mut rng, &p("attn_q.weight"), q, e);
        w = matrix(w, &mut rng, &p("attn_k.weight"), kv, e);
        w = matrix(w, &mut rng, &p("attn_v.weight"), kv, e);
        if a == "qwen2" {
            w = vector(w, &mut rng, &p("attn_q.bias"), q, 0.0);
            w = vector(w, &mut rng, &p("attn_k.bias"), kv, 0.0);
            w = vector(w, &mut rng, &p("attn_v.bias"), kv, 0.0);
        }
        if a == "gemma3" {
            w = vector(w, &mut rng, &p("attn_q_norm.weight"), hd, 1.0);
            w = vector(w, &mut rng, &p("attn_k_norm.weight"), hd, 1.0);
            w = vector(w, &mut rng, &p("post_attention_norm.weight"), e, 1.0);
            w = vector(w, &mut rng, &p("post_ffw_norm.weight"), e, 1.0);
        }
        w = matrix(w, &mut rng, &p("attn_output.weight"), e, q);
        w = vector(w, &mut rng, &p("ffn_norm.weight"), e, 1.0);
        w = matrix(w, &mut rng, &p("ffn_gate.weight"), spec.ff, e);
        w = matrix(w, &mut rng, &p("ffn_up.weight"), spec.ff, e);
        w = matrix(w, &mut rng, &p("ffn_down.weight"), e, spec.ff);
    }
    w = vector(w, &mut rng, "output_norm.weight", e, 1.0);
    if !spec.tied {
        w = matrix(w, &mut rng, "output.weight", vocab, e);
    }
    w.bytes()
}
